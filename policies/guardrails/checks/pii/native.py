"""Labels written in other scripts: the `labels` reading (a word naming a number, with a word of its
own beside it, names another thing's identifier) for words that are not Latin, where `context` reads
none.

- **Scripts with spaces** (Cyrillic, Greek, Arabic, Persian, Hebrew, Devanagari, Bengali): a naming
  word (``номер``, ``αριθμός``, ``رقم``, ``شماره``, ``מספר``, ``संख्या``, ``नंबर``) with another word beside
  it, before or after (``Номер заказа``, ``رقم الطلب``, ``ऑर्डर संख्या``), names that thing's number.
- **Scripts without spaces** (Chinese, Japanese, Korean, Thai): a naming morpheme joined to its noun
  (``注文番号``, ``订单号``, ``运单号``, ``주문번호``, ``เลขที่คำสั่งซื้อ``), after the particles that follow it
  (``は``, ``是``, ``는``) are dropped; Korean may write the noun apart (``주문 번호``).
- A phone word anywhere in those words (``電話番号``, ``手机号``, ``전화번호``, ``номер телефона``,
  ``رقم الهاتف``, ``WhatsApp``) says the number is one; a possessive or a determiner (``我的号码``,
  ``私の番号``, ``제 번호``, ``мой номер``, ``मेरा नंबर``) names no other thing.

Word lists are written in their scripts and folded as the text is (`normalize.fold`: Cyrillic and Greek
letters that look Latin become Latin), so they match the folded text.
"""

# ruff: noqa: RUF001  (words and punctuation of other scripts, some drawn like Latin ones, on purpose)
from __future__ import annotations

import re

from policies.guardrails.normalize import fold

_REACH = 32  # characters before a number read for a label
# Runs of letters and their marks (Thai and Devanagari vowel signs are marks, not word characters).
_WORD = re.compile(r"[^\s\d\"'()\[\]{}<>:;,.!?#*/\\|+=@&%$~^_\-–—、。，：；！？（）「」『』【】・]+")
_BREAK = re.compile(r"[\n!?。！？]")  # a label ends where a sentence does


def _folded(words: str) -> tuple[str, ...]:
    return tuple(fold(word).text for word in words.split())


# Words that name a number, written apart from what they name (scripts with spaces).
_NAMING = frozenset(
    _folded("номер номера номеру број αριθμός αριθμ رقم الرقم شماره מספר מס संख्या नंबर क्रमांक नम्बर নম্বর সংখ্যা")
)
# Naming morphemes joined to the noun they follow (Chinese, Japanese, Korean) or precede (Thai).
_SUFFIXES = _folded("番号 号码 號碼 编号 編號 번호 单号 單號 号 號")
_PREFIXES = _folded("เลขที่ หมายเลข")
# Particles and copulas after the naming morpheme ("注文番号は", "订单号是", "주문번호는").
_PARTICLES = _folded("は が を も の 是 为 為 는 은 이 가 로 으로 의")
# Any of these inside the words says phone (joined to the naming word or apart from it).
_PHONE = _folded(
    "電話 电话 携帯 ケータイ 手机 手機 手提 傳真 传真 微信 ファックス 전화 휴대폰 핸드폰 폰 팩스 카톡 "
    "телефон телефона тел моб мобильн мобільн сотов факс звон звін дзвон τηλ κινητ φαξ "
    "هاتف الهاتف جوال الجوال موبايل تلفون فاكس واتساب تلفن همراه טלפון נייד פקס "
    "फोन फ़ोन मोबाइल কল ফোন মোবাইল โทร มือถือ เบอร์ whatsapp "
    # verbs of calling and contacting: 請致電, 拨打, 联系, 連絡, 연락, ติดต่อ, اتصل, התקשר, कॉल, Утас, զանգ
    "致電 致电 撥打 拨打 來電 来电 聯絡 联络 聯繫 联系 連絡 연락 ติดต่อ اتصل اتصال رابط התקשר התקשרו कॉल "
    "утас байланыс дзвоніть զանգ დარეკ დამირეკ"
)
_PHONE_IN = re.compile("|".join(map(re.escape, _PHONE)))
_PHONE_MARK = re.compile("|".join(re.escape(mark) for mark in _PHONE if not mark.isascii()))
# Words that own a number or point at it, not things: possessives, determiners, pronouns.
_OWNERS = frozenset(
    _folded(
        "мой моя моё мои твой ваш ваша наш наша его её этот эта мій моє мої твій його її моят мој моја "
        "μου σου του της μας σας αυτός αυτό "
        "رقمي هذا هذه שלי שלך שלו שלה שלנו זה मेरा मेरी मेरे हमारा हमारी आपका आपकी उसका यह আমার "
        "我 你 您 他 她 我们 你们 私 僕 俺 あなた 彼 彼女 내 제 나 저 우리 ของฉัน ของผม"
    )
)
_POSSESSIVE_MARKS = _folded("的 の 의")


def script_labelled(text: str, start: int) -> bool:
    """Do the non-Latin words just before `start` (folded text) name the number there another thing's
    identifier? Cheap for Latin text: the window is checked for non-ASCII first."""
    window = text[max(0, start - _REACH) : start]
    if window.isascii():
        return False
    cut = max((m.end() for m in _BREAK.finditer(window)), default=0)
    words = _WORD.findall(window, cut)[-3:]
    if not words or _PHONE_IN.search(" ".join(words)):
        return False
    last = _drop_particles(words[-1])
    for suffix in _SUFFIXES:
        if last.endswith(suffix):
            noun = last[: -len(suffix)] or (words[-2] if len(words) > 1 else "")
            return _names_a_thing(noun)
    for prefix in _PREFIXES:
        if last.startswith(prefix):
            return _names_a_thing(last[len(prefix) :])
    for at, word in enumerate(words):
        if word in _NAMING:
            beside = [words[i] for i in (at - 1, at + 1) if 0 <= i < len(words)]
            return any(_names_a_thing(other) for other in beside)
    return False


def script_says_phone(text: str, start: int) -> bool:
    """Does a phone word of another script stand in the words just before `start` (``電話``,
    ``телефон``, ``الهاتف``, ``टेलीफोन``)? What `context` says of Latin words, for the rest."""
    window = text[max(0, start - _REACH) : start]
    return not window.isascii() and _PHONE_MARK.search(window) is not None


def _drop_particles(word: str) -> str:
    for particle in _PARTICLES:
        if word.endswith(particle) and len(word) > len(particle):
            return word[: -len(particle)]
    return word


def _names_a_thing(noun: str) -> bool:
    """Is `noun` a thing's name, not an owner ("我的", "私の", "제") or a naming word itself?"""
    for mark in _POSSESSIVE_MARKS:
        noun = noun.removesuffix(mark)
    return bool(noun) and noun not in _OWNERS and noun not in _NAMING
