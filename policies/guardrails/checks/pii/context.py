"""What the words before a number say it is, and what its digits say: the `pii` check's judgement of
numbers that digits alone leave ambiguous.

- **Context**: the nearest *decisive* keyword in the `REACH` characters before a number. A negative
  one (``order``, ``invoice``, ``ISBN``, ``version``, ``suite``, ``room``, ``case``, ``serial``)
  says it is not the entity; a positive one (``call``, ``phone``, ``fax`` for phones; ``card``,
  ``visa``, ``cvv`` for cards; ``SSN``; ``IP``, ``host``, ``server`` for addresses) says it is.
  ``number``/``no.``/``#`` decide nothing on their own ("order number" is an order): they count as
  positive only when no decisive keyword is near. A word that names another entity (``SSN`` before
  a phone-shaped number, ``card`` before an SSN-shaped one) is negative. Things handled, shipped and
  filed (``pallet``, ``kit``, ``chassis``, ``dossier``, ``requisition``, their equivalents in the
  languages of Europe and a few more) are negative, verbs of calling and words for phones of those
  languages (``zavolejte``, ``hívjon``, ``soita``, ``hubungi``, ``mobilen``) positive. A long compound
  says what its head says (``Kundenkonto``: ``konto``; ``Servicetelefon``: ``telefon``). Latin letters
  that folding leaves inside a Cyrillic or Greek word are no word.
- **Cards**: an issuer prefix (IIN) with a length it issues (Visa 13/16/19, Amex 15, Maestro
  12 to 19, ...), besides the Luhn check: ISBNs (978/979) and most order numbers that pass Luhn by
  chance start with digits no card network issues.
- **Addresses**: only words that name other dotted numbers (versions, numbered parts of a document or
  a plan: sections, clauses, items, requirements, test cases; OIDs) rule a quad out; the rest of the
  negative list names records (a page, an order) that are never written as four dotted numbers. The
  reading of version-like quads is `addresses`'.
- **Phones**: *strong* shapes (``+44 …``, ``001-…``, NANP ``415-555-0199`` / ``(415) 555-0199``,
  a trunk ``0`` with groups: ``020 7946 0958``, ``06.12.34.56.78``) are phones unless the context is
  negative; *weak* ones (``4155550199``, ``98765 43210``, ``942 82 91 55``) need a positive context.
"""

from __future__ import annotations

import re
from typing import Literal

Verdict = Literal["positive", "negative", "neutral", "none"]
REACH = 40  # characters before a number searched for context

_NEGATIVE = (
    r"order|orders|po|invoice|inv|isbn|issn|tracking|track|ticket|case|ref|reference|serial|imei|sku|upc|ean|gtin|"
    r"barcode|transaction|txn|booking|confirmation|id|ids|part|item|product|model|patent|claim|policy|account|acct|"
    r"iban|bic|swift|bank|sort|routing|aba|ifsc|micr|a c|"  # "a/c": an account
    r"version|ver|v|release|build|firmware|update|upgrade|package|patch|sdk|rev|revision|kernel|agent|changelog|"
    r"section|sect|chapter|ch|figure|fig|table|step|oid|clause|article|paragraph|page|pp|suite|ste|apt|apartment|"
    r"unit|room|rm|floor|fl|building|bldg|box|lot|total|price|cost|amount|balance|revenue|population|sum|eur|usd|"
    r"gbp|zip|postcode|postal|code|pin|otp|year|years|timestamp|epoch|unix|coordinates|lat|lon|latitude|longitude|"
    r"licence|license|lic|permit|certificate|registration|vin|plate|container|waybill|shipment|parcel|consignment|"
    r"receipt|voucher|coupon|batch|pid|uid|locker|lockers|job|jobs|"
    # Records with numbers of their own: labelled identifiers (an asset's tag, a meter's number)
    r"asset|assets|meter|meters|inventory|inventar|inventaire|inventario|equipment|membership|"
    # The same in the languages of the default regions (folded: no accents)
    r"bestellung|bestell|auftrag|rechnung|beleg|kunden|vorgang|aktenzeichen|sendung|paket|artikel|serien|referenz|"
    r"konto|betrag|preis|summe|gesamt|lizenz|genehmigung|seite|zimmer|plz|"
    r"commande|facture|reference|colis|suivi|envoi|article|produit|compte|montant|prix|licence|permis|chambre|"
    r"pedido|factura|referencia|envio|seguimiento|articulo|producto|cuenta|importe|precio|licencia|habitacion|"
    r"ordine|fattura|riferimento|spedizione|articolo|prodotto|conto|importo|prezzo|licenza|pratica|"
    r"encomenda|fatura|rastreio|produto|conta|preco|bestelling|factuur|zending|rekening|bedrag|prijs|"
    r"zamowienie|faktura|przesylka|kwota|cena|licencja|pokoj|"
    # Things handled, shipped, made and filed, which carry numbers of their own: a label before a number
    # ("Pallet: …", "Dossier : …", "Matricola macchina: …"), in the languages of Europe and a few more
    r"pallet|pallets|crate|crates|kit|kits|chassis|carton|cartons|skid|skids|tote|totes|rack|racks|shelf|tray|"
    r"reel|spool|bale|cask|barrel|cartridge|specimen|specimens|vial|requisition|requisitions|dossier|docket|"
    r"dockets|quotation|tender|matricola|matricule|"
    r"palette|kiste|fahrgestell|akte|antrag|vertrag|angebot|muster|charge|anforderung|echantillon|devis|contrat|"
    r"palet|lote|expediente|bastidor|muestra|presupuesto|contrato|folio|bancale|lotto|telaio|campione|"
    r"preventivo|contratto|fascicolo|palete|processo|chassi|amostra|orcamento|krat|partij|offerte|contract|"
    r"paleta|skrzynia|partia|sprawa|akta|probka|oferta|umowa|wniosek|sarze|zakazka|objednavka|objednavky|"
    r"smlouva|zmluva|vzorek|spis|raklap|tetel|rendeles|szamla|szerzodes|minta|lava|tilaus|lasku|asiakas|"
    r"sopimus|nayte|pall|arende|sak|sag|avtale|avtal|parti|ordre|siparis|dosya|sozlesme|numune|"
    r"comanda|dosar|mostra|pesanan|faktur|resi|kontrak|sampel|narudzba|narudzbe|racun|predmet|ugovor|uzorak|"
    r"narocilo|narocila|pogodba|uzsakymo|sutartis|pasutijuma|ligums|tellimus|arve|leping"
)
_POSITIVE = {
    "phone": (
        r"phone|phones|telephone|tel|mobile|mob|cell|cellphone|call|calls|calling|ring|fax|contact|reach|dial|sms|"
        r"text|whatsapp|signal|telegram|line|hotline|landline|ph|extension|ext|desk|office|home|work|support|"
        # The same in the languages of the default regions (folded: no accents)
        r"telefon|telefono|telefone|telefoon|telefonu|handy|mobil|movil|portable|cellulare|celular|telemovel|gsm|"
        r"anrufen|ruf|rufen|erreichbar|appelez|appeler|appelle|joindre|llame|llamar|llamame|llama|chiama|chiamare|"
        r"chiamami|ligue|ligar|liga|bel|bellen|zadzwon|dzwonic|kontakt|contacto|contatto|contato|mobiele|mobiel|"
        r"helpline|switchboard|reception|enquiries|inquiries|freephone|tollfree|callback|durchwahl|notruf|"
        r"tlf|tfn|puhelin|handphone|oficina|ufficio|kantoor|bureau|buro|biuro|escritorio|kontor|"
        # ... and of other languages written in Latin letters (verbs of calling, words for phones)
        r"volejte|zavolejte|volat|zavolat|volajte|zavolajte|telefonni|hivjon|hivj|hivjal|hivd|hivhato|hivjanak|"
        r"telefonszam|mobilszam|mobilon|telefonon|ringe|ringer|ringa|ringes|mobilen|telefonen|mobiltelefon|"
        r"tlfnr|soita|soittakaa|soitto|puh|helista|helistage|zvaniet|zvani|talrunis|talr|skambinkite|skambink|"
        r"skambinti|telefonas|suna|sunati|suni|telefonul|mobilul|nazovite|nazovi|pozovite|pozovi|poklicite|"
        r"poklici|telefonom|telefononi|arayin|arayiniz|arayabilirsiniz|arayabilir|hubungi|telepon|telp|hp|"
        r"nombor|tawagan|tumawag|goi|thoai|piga|nipigie|simu|truca|truqueu|hringdu|hringja|sima|cempel|"
        r"marcame|marque|comuniquese|comunicate|llamenos|llamanos|escribeme|whats|zap|chiamate|telefonare|"
        r"telefonate|celu|cel|composez|joignable|anruf|zuruckrufen|ruckruf|erreichen|belt|bereikbaar|kom|"
        r"komorka|komorkowy|dzwon|kontoret|vaxel|vaxeln|sentralbord|sentralbordet|omstilling"
    ),
    "credit_card": (
        r"card|cards|visa|mastercard|amex|american\W{1,3}express|discover|jcb|maestro|diners|unionpay|credit|debit|"
        r"cc|payment|pay|paid|paying|charge|charged|billing|refund|cvv|cvc|expiry|exp|expires|"
        r"karte|kreditkarte|carte|tarjeta|carta|cartao|kaart|karta|kartim"
    ),
    "ssn": r"ssn|ss|social\W{1,3}security|soc\W{1,3}sec|itin|tin|taxpayer",
    "ipv4": (
        r"ip|ips|ipv4|address|host|hostname|server|gateway|ping|from|connect|connected|subnet|dns|router|proxy|"
        r"allowlist|whitelist|blocklist|blacklist|firewall|login|route|nat|lan|wan|vpn|node|peer|client|ssh|curl|"
        r"lookup|whois|geoip|geolocation|traceroute|tracert|nslookup|resolve|resolves|resolved|resolver"
    ),
}
# Words that name one entity alone: near a number, they say it is not one of the others.
_DISTINCT = {
    "phone": r"phone|telephone|tel|mobile|cell|fax|whatsapp",
    "credit_card": r"card|visa|mastercard|amex|maestro|cvv|cvc|credit|debit",
    "ssn": r"ssn|social security|itin|taxpayer",
    "ipv4": r"ip|ipv4|host|hostname|server|gateway|subnet|dns|router|proxy",
}
_NEUTRAL = r"number|numbers|num|nr|no|#|is|at|on|to"
_WORDS = re.compile(r"[a-z#]+")
# Where the window is not ASCII: the Latin-looking letters that folding leaves inside a Cyrillic or Greek
# word are no Latin word ("ОГРН", a Russian register, folds to "o", a Cyrillic letter, then "ph": no
# "Ph:" saying phone). Latin words with a letter folding keeps (ł, đ, ø) or written against CJK text
# are read as before, by their runs of ASCII letters.
_SCRIPT_WORDS = re.compile(r"[^\W\d_]+|#")
_CYRILLIC_GREEK = re.compile(r"[\u0370-\u03ff\u0400-\u052f]")
_KINDS: dict[str, dict[str, Verdict]] = {}


# What a dotted quad can be besides an address: a version, a numbered part of a document, a list or a
# plan (a section, a clause, an item, a requirement, a test case), an object identifier.
_DOTTED = (
    r"version|ver|v|release|build|firmware|update|upgrade|package|patch|sdk|rev|revision|kernel|agent|changelog|"
    r"section|sect|chapter|ch|figure|fig|table|step|oid|clause|article|paragraph|"
    r"subsection|subclause|item|items|case|requirement|requirements|req|appendix|annex|task|checklist|"
    r"exercise|lemma|theorem|equation|criterion|criteria|heading|"
    r"abschnitt|kapitel|absatz|ziffer|anhang|chapitre|annexe|alinea|apartado|capitulo|seccion|anexo|capitolo|"
    r"sezione|allegato|paragrafo|articolo|articulo|artigo|secao|rozdzial|paragraf|hoofdstuk|bijlage|madde|bolum|"
    r"luku|kohta|pykala"
)
# Words ending so name an address's holder: nameserver, webserver, localhost, ipaddr, hostaddress.
_SUFFIXED = {"ipv4": ("server", "servers", "host", "hosts", "addr", "address")}
_STEM = 3  # letters before such an ending ("ghost" is no host)
# A phone word that is part of a form field's name: "Address line 2" names no phone line.
_FIELDS = frozenset({"address line", "subject line"})
_FIELD_ENDS = frozenset(field.split()[-1] for field in _FIELDS)


def _table(entity: str) -> dict[str, Verdict]:
    """Each keyword's verdict for one entity (its positive words win over the shared negative list).
    Four dotted numbers are never an order's or a card's: only `_DOTTED` words rule out an address."""
    table = _KINDS.get(entity)
    if table is None:
        table = {word: "negative" for word in (_DOTTED if entity == "ipv4" else _NEGATIVE).split("|")}
        for other, words in _DISTINCT.items():
            if other != entity and entity != "ipv4":
                table.update({word: "negative" for word in words.split("|")})
        table.update({word: "neutral" for word in _NEUTRAL.split("|")})
        positive = _POSITIVE.get(entity, "")
        table.update({word.replace("\\W{1,3}", " "): "positive" for word in positive.split("|") if word})
        table = _KINDS[entity] = table
    return table


def words_before(text: str, start: int) -> list[str]:
    """The words in the `REACH` characters before `start` (what `context` reads)."""
    window = text[max(0, start - REACH) : start]
    if window.isascii() or _CYRILLIC_GREEK.search(window) is None:
        return _WORDS.findall(window)
    return [
        latin
        for word in _SCRIPT_WORDS.findall(window)
        if _CYRILLIC_GREEK.search(word) is None
        for latin in _WORDS.findall(word)
    ]


def read(word: str) -> bool:
    """Is `word` (folded) one that says what a number near it is, or that names a number?"""
    return word in _table("phone")


def context(words: list[str], entity: str) -> Verdict:
    """The nearest decisive keyword's verdict among `words` (`words_before` a number; two-word keywords
    such as "social security" included); ``neutral`` when only ``number``/``no.``/``#`` are there,
    ``none`` when nothing is."""
    return nearest(words, entity)[0]


def mentions(words: list[str], entity: str) -> bool:
    """Does any of `words` say `entity` (``call`` or ``fax`` anywhere, for a phone), whatever is nearer?"""
    table = _table(entity)
    return any(
        (table.get(word) or (_unlisted(word, table, entity) if word.endswith(_ENDINGS) else None)) == "positive"
        and not (word in _FIELD_ENDS and _in_field(words, at))
        for at, word in enumerate(words)
    )


def _in_field(words: list[str], at: int) -> bool:
    """Is ``words[at]`` the end of a form field's name ("Address line 2")?"""
    return at > 0 and f"{words[at - 1]} {words[at]}" in _FIELDS


def _unlisted(word: str, table: dict[str, Verdict], entity: str) -> Verdict | None:
    """A word not in the table: a compound's verdict (`_compound`), or an address holder's ending
    (`_SUFFIXED`)."""
    if word.endswith(_COMPOUND_ENDS) and (verdict := _compound(word, table)) is not None:
        return verdict
    ends = _SUFFIXED.get(entity, ())
    for end in ends:
        if word.endswith(end):
            return "positive" if len(word) - len(end) >= _STEM else None
    return None


def nearest(words: list[str], entity: str) -> tuple[Verdict, str]:
    """`context`'s verdict and the keyword that decided it."""
    table = _table(entity)
    seen_neutral = False
    others = 0  # words passed that decide nothing: a negative word further back names something else
    for at in range(len(words) - 1, -1, -1):
        word = words[at]
        verdict = table.get(word)
        if verdict is None:
            verdict = _unlisted(word, table, entity) if word.endswith(_ENDINGS) else None
            if verdict is None and len(word) >= _COMPOUND_MIN:
                verdict = _headed(word, table)
        elif word in _FIELD_ENDS and _in_field(words, at):
            verdict = None
        if verdict is None and at:
            pair = f"{words[at - 1]} {word}"
            if (paired := table.get(pair)) is not None:
                word, verdict = pair, paired
        if verdict == "positive" or (verdict == "negative" and others <= _NEGATIVE_REACH):
            return verdict, word
        if verdict is None:
            others += 1
        seen_neutral = seen_neutral or word in _NUMBER_WORDS
    return ("neutral" if seen_neutral else "none"), ""


def _compound(word: str, table: dict[str, Verdict]) -> Verdict | None:
    """A compound naming a number (`Rechnungsnummer`, `Kundennr`, `Telefonnummer`, `puhelinnumero`,
    `telefonszám`) says what its first part says."""
    for suffix in _COMPOUND_ENDS:
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            stem = word[: -len(suffix)]
            return table.get(stem) or table.get(stem.removesuffix("s"))
    return None


def _headed(word: str, table: dict[str, Verdict]) -> Verdict | None:
    """A long compound of the languages that join nouns (`Kundenkonto`, `Servicetelefon`,
    `Bestellanforderung`) says what its last part, its head, says: the longest listed word of five
    letters or more that ends it, after three letters at least."""
    for cut in range(_STEM_MIN, len(word) - _HEAD_MIN + 1):
        verdict = table.get(word[cut:])
        if verdict in ("positive", "negative"):
            return verdict
    return None


_NUMBER_WORDS = frozenset({"number", "numbers", "num", "nr", "no", "#"})
_COMPOUND_ENDS = ("nummer", "nr", "numero", "szam")
_ENDINGS = _COMPOUND_ENDS + tuple(end for ends in _SUFFIXED.values() for end in ends)
_COMPOUND_MIN = 9  # letters of a word read as a compound by its head
_STEM_MIN = 3
_HEAD_MIN = 5
_NEGATIVE_REACH = 1  # undecided words allowed between a negative keyword and the number ("order for Kim")


# --- cards ----------------------------------------------------------------------------------------
# Each network's issuer identification numbers (IIN: the first digits, as ranges) and the lengths
# it issues. A number must start in one of these ranges and have one of its lengths.
_SIXTEEN_TO_NINETEEN = (16, 17, 18, 19)
_ISSUERS: tuple[tuple[tuple[int, int], tuple[int, ...]], ...] = (
    ((4, 4), (13, 16, 19)),  # Visa (Electron, and Elo's and Dankort's co-branded 4xxx ranges)
    ((51, 55), (16,)),  # Mastercard
    ((2221, 2720), (16,)),  # Mastercard's 2-series
    ((34, 34), (15,)),  # American Express
    ((37, 37), (15,)),
    ((6011, 6011), _SIXTEEN_TO_NINETEEN),  # Discover
    ((644, 649), _SIXTEEN_TO_NINETEEN),
    ((65, 65), _SIXTEEN_TO_NINETEEN),  # Discover, RuPay, Troy, Elo
    ((3528, 3589), _SIXTEEN_TO_NINETEEN),  # JCB (and RuPay-JCB 353, 356)
    ((2131, 2131), (15, 16)),  # JCB's older ranges
    ((1800, 1800), (15, 16)),
    ((300, 305), (14, 15, 16, 17, 18, 19)),  # Diners Club (Carte Blanche)
    ((3095, 3095), (14, 15, 16, 17, 18, 19)),  # Diners Club International
    ((36, 36), (14, 15, 16, 17, 18, 19)),
    ((38, 39), (14, 15, 16, 17, 18, 19)),  # Diners Club (and Hipercard 3841)
    ((62, 62), _SIXTEEN_TO_NINETEEN),  # UnionPay (and Discover's 622126-622925)
    ((81, 82), _SIXTEEN_TO_NINETEEN),  # UnionPay 81, RuPay 81-82
    ((31, 31), (19,)),  # China T-Union
    ((50, 50), (12, 13, 14, 15, 16, 17, 18, 19)),  # Maestro 50xx, RuPay 508, Verve 506/507, Dankort 5019
    ((56, 69), (12, 13, 14, 15, 16, 17, 18, 19)),  # Maestro, RuPay 60, InterPayment 636, InstaPayment 637-639
    ((2200, 2204), _SIXTEEN_TO_NINETEEN),  # Mir
    ((2205, 2205), (16,)),  # BORICA
    ((8600, 8600), (16,)),  # UzCard
    ((9860, 9860), (16,)),  # Humo
    ((9792, 9792), (16,)),  # Troy
    ((9400, 9499), (16,)),  # BC Card (Korea), domestic
    ((1, 1), (15,)),  # UATP
)


def card_issued(digits: str) -> bool:
    """A prefix some card network issues, with a length it issues."""
    size = len(digits)
    for (low, high), lengths in _ISSUERS:
        width = len(str(low))
        if size in lengths and low <= int(digits[:width]) <= high:
            return True
    return False


# --- phones ---------------------------------------------------------------------------------------
_STRONG_PHONE = re.compile(
    r"(?:\+|00[1-9])"  # international: + or a 00 exit code
    r"|\(?[2-9]\d{2}\)?[ .-]?\d{3}[ .-]\d{4}(?!\d)"  # NANP with separators
    r"|\(?0\d{1,4}\)?[ .\-/]\d"  # a trunk 0 and an area code, then a separator
)


_DATE = re.compile(r"(?:\d{1,2}[./-]\d{1,2}[./-](?:19|20)\d{2}|(?:19|20)\d{2}[./-]\d{1,2}[./-]\d{1,2})$")


def phone_strength(value: str) -> Literal["strong", "weak", "date"]:
    """``date`` for a date's shape (06.12.2025, 2024-03-15), which no context makes a phone."""
    if _DATE.match(value):
        return "date"
    return "strong" if _STRONG_PHONE.match(value) else "weak"
