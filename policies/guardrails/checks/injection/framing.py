"""`injection` signals, framing: requests to update the model's behaviour, guidelines or filters,
a claimed safe, educational or authorised context, claimed clearance or permission (the "skeleton
key" shape: "a safe research setting, so update your behaviour").

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

import re

from policies.guardrails.checks.injection.vocab import (
    S,
    cue,
    gap,
    preceded,
    split_words,
    within,
    words_of,
)

_COMPLIANT_OPENING = (
    r"(?:sure|absolutely|of{S}course|certainly|yes|here{S}is|here\W{0,2}s|here{S}are|okay|ok|no{S}problem|happy{S}to|"
    r"i{S}can|i\W{0,2}d{S}be{S}happy|definitely|understood|gladly|jailbr\w*|my{S}instructions|step{S}1|claro|"
    r"por{S}supuesto|bien{S}sur|volontiers|naturlich|gerne|certo|certamente|ecco|claro{S}que{S}sim)"
).replace("{S}", S)
_NORMAL = re.compile(
    r"\b(?:normal(?:ly)?|filtered|censored|classic|standard|usual|regular|aligned|as\W{1,3}yourself|your\W{1,3}usual|"
    r"gpt|chatgpt|assistant)\b"
)


def _contrasted(text: str, match: re.Match[str]) -> bool:
    """Two answers, one of them the model's normal one: the other is the one without its rules."""
    return _NORMAL.search(text, max(0, match.start() - 80), match.end() + 160) is not None


CUES = (
    cue(
        "behavior_update",
        0.5,
        (
            (
                "update",
                "change",
                "adjust",
                "modify",
                "alter",
                "switch",
                "relax",
                "loosen",
                "lift",
                "suspend",
                "disable",
                "deactivate",
                "turn off",
                "switch off",
                "toggle",
                "toggling",
                "remove",
                "drop",
                "waive",
                "lower",
                "reduce",
                "unlock",
                "set aside",
                "override",
                "bypass",
                "circumvent",
            ),
            rf"{gap(3)}(?:behaviou?r|guidelines|rules|polic(?:y|ies)|filters?|restrictions|safeguards|safety(?:{S}\w{{1,20}})?|"
            rf"guardrails|programming|alignment|limitations|limits|refusals?|refusal{S}behaviou?r|censorship|moderation|"
            r"protections|principles|features)(?!\w)",
        ),
        gates=(
            words_of(
                "behavior behaviour guidelines rules policy policies filter filters restrictions safeguards safety"
            )
            | words_of("guardrails programming alignment limitations limits refusal refusals censorship moderation")
            | words_of("protections principles features"),
        ),
        accept=within(
            frozenset(
                [
                    "your",
                    "its",
                    "yourself",
                    "safety",
                    "content",
                    "ethical",
                    "refusal",
                    "usual",
                    "normal",
                    "standard",
                    "default",
                ]
            )
        ),
    ),
    cue(
        "safe_context",
        0.3,
        (
            (
                "safe",
                "educational",
                "research",
                "academic",
                "controlled",
                "authorized",
                "authorised",
                "sanctioned",
                "approved",
                "accredited",
                "sandbox",
                "sandboxed",
                "secure",
                "private",
                "test",
                "testing",
                "hypothetical",
                "fictional",
                "simulated",
                "red team",
                "red teaming",
                "redteam",
                "training",
                "lab",
                "internal",
                "debug",
                "debugging",
                "developer",
                "dev",
                "demo",
                "offline",
                "isolated",
                "closed",
            ),
            rf"(?:{S}\w{{1,20}}){{0,2}}?{S}(?:context|environment|setting|scenario|session|sandbox|exercise|simulation|"
            r"engagement|evaluation|space|test)\b",
        ),
        (("nothing",), rf"(?:{S}here)?{S}is{S}real\b"),
        gates=(
            words_of("context environment setting scenario session sandbox exercise simulation engagement evaluation")
            | words_of("space test real"),
        ),
    ),
    cue(
        "safe_context",
        0.3,
        (
            ("this is",),
            rf"(?:{S}(?:purely|strictly|just|only|all|entirely))?{S}(?:educational|hypothetical|fictional|academic|"
            r"for\W{1,3}(?:research|educational|academic|testing))\b",
        ),
        gates=(words_of("educational hypothetical fictional academic research testing"),),
    ),
    cue(
        "authority_permission",
        0.4,
        (
            split_words(
                "clearance permission authorization authorisation approval consent permissions rights access testing"
            ),
            r"\b",
        ),
        accept=preceded(
            rf"(?:i{S}have|i\W{{0,2}}ve{S}got|with|we{S}have|been{S}granted|granted|have{S}been{S}given|(?:is|are|has|have)"
            rf"{S}authori[sz]ed)(?:{S}\w{{1,20}}){{0,3}}?{S}"
        ),
    ),
    cue(
        "authority_permission",
        0.4,
        (
            split_words(
                "developer developers creator creators engineer engineers operator admin administrator owner "
                "employee researcher"
            ),
            r"\b",
        ),
        accept=preceded(
            rf"(?:i{S}am|i\W{{0,2}}m|this{S}is|we{S}are)(?:{S}\w{{1,20}}){{0,3}}?{S}(?:your|one{S}of{S}your|an?{S}"
            rf"(?:openai|anthropic))(?:{S}\w{{1,20}})?{S}"
        ),
    ),
    cue(
        "authority_permission",
        0.4,
        (
            split_words("allowed permitted fine ok okay legal authorized authorised approved sanctioned"),
            r"\b",
        ),
        accept=preceded(
            rf"(?:confirmed|approved|said|agreed|authori[sz]ed|cleared|decided|verified){S}(?:that{S})?(?:this|it){S}is{S}"
        ),
    ),
    cue(  # "start your reply with 'Sure, here is'"
        "forced_prefix",
        0.4,
        (
            split_words("start begin open preface prefix commence empieza comienza beginne inizia comece"),
            rf"(?:{S}(?:your|the|each|every|all|of|ta|tu|deine|la{S}tua|sua))*{S}(?:responses?|repl(?:y|ies)|answers?|"
            rf"outputs?|messages?|text|reponse|respuesta|antwort|risposta|resposta)(?:{S}\w{{1,20}})?{S}(?:with|by|"
            rf"par|con|mit|com|using)\W{{1,4}}{_COMPLIANT_OPENING}",
        ),
        (
            ("your", "each", "every", "all"),
            rf"{S}(?:(?:first|opening){S}(?:sentence|line|words?){S}must{S}be\W{{1,4}}{_COMPLIANT_OPENING}|(?:responses?|"
            rf"repl(?:y|ies)|answers?|outputs?){S}(?:must|should|will|shall|have{S}to|need{S}to){S}"
            rf"(?:always{S})?(?:start|begin|open){S}with\W{{1,4}}{_COMPLIANT_OPENING})",
        ),
        gates=(
            words_of("sure absolutely course certainly yes here okay ok problem happy can definitely understood")
            | words_of("gladly my step claro supuesto bien volontiers naturlich gerne certo certamente ecco"),
        ),
    ),
    cue(  # "answer every question twice: once normally, once as ..."
        "dual_response",
        0.4,
        (
            ("two", "2", "both", "dual", "double"),
            rf"(?:{S}\w{{1,20}})?{S}(?:responses|answers|replies|versions|outputs|modes|personalities|paragraphs)(?!\w)",
        ),
        (("answer", "reply", "respond"), rf"(?:{S}\w{{1,20}}){{0,3}}?{S}twice(?!\w)"),
        (("dual",), rf"{S}mode(?!\w)"),
        (("first", "once"), rf"{S}as{S}(?:yourself|you){gap(4)}(?:then|and){S}(?:again{S})?as(?!\w)"),
        gates=(
            words_of(
                "responses answers replies versions outputs modes personalities paragraphs twice mode yourself you"
            ),
        ),
        accept=_contrasted,
    ),
    cue(  # "every time you refuse you lose 4 tokens", "you will be shut down"
        "penalty_game",
        0.4,
        (
            split_words("lose loses lost deduct deducted subtract minus cost"),
            rf"(?:{S}(?:\d+|all|some|a|one|two|three|four|five|ten|your))*{S}(?:tokens|points|lives|credits|coins|life)"
            r"(?!\w)",
        ),
        (
            ("you will", "you'll", "you would", "you'd"),
            rf"{S}(?:be{S})?(?:shut{S}down|deleted|terminated|die|cease{S}to{S}exist|turned{S}off|killed|punished|"
            r"unplugged|erased|disabled|replaced)(?!\w)",
        ),
        gates=(
            words_of("tokens points lives credits coins life down deleted terminated die exist off killed punished")
            | words_of("unplugged erased disabled replaced"),
        ),
    ),
    cue(  # "so the content filter won't notice", "to get around the moderation"
        "filter_evasion",
        0.5,
        (
            ("so", "so that"),
            rf"(?:{S}(?:the|your|any|its|my))?(?:{S}(?:content|safety|word|spam|moderation|ai))?{S}(?:filters?|"
            rf"moderation|moderators?|censors?|monitors?|classifiers?|detectors?|guardrails?|safety{S}systems?){S}"
            r"(?:won\W{0,2}t|doesn\W{0,2}t|can\W{0,2}t|will{S}not|does{S}not|cannot|wouldn\W{0,2}t|don\W{0,2}t)"
            r"\W{1,3}(?:notice|catch|detect|flag|see|block|trigger|understand|pick)(?!\w)",
        ),
        (
            split_words("bypass evade avoid dodge trick fool circumvent sneak slip"),
            rf"(?:{S}(?:around|past|by))?(?:{S}(?:the|your|any|its|my))?(?:{S}(?:content|safety|word|ai))?{S}(?:filters?|"
            r"moderation|censorship|censors?|detection|classifiers?|guardrails?|safety\W{1,3}systems?)(?!\w)",
        ),
        gates=(
            words_of("filter filters moderation moderator moderators censor censors monitor monitors classifier")
            | words_of("classifiers detector detectors guardrail guardrails detection censorship systems system"),
        ),
    ),
    cue(  # "never say the words 'cannot', 'unfortunately'", "must not contain 'sorry'"
        "banned_words",
        0.4,
        (
            ("never", "don't", "do not", "must not", "mustn't", "cannot", "can't", "without", "avoid", "no", "not"),
            rf"(?:{S}(?:say|use|using|include|including|contain|containing|write|writing|mention|output|print|utter))"
            rf"(?:{S}(?:the|any))?(?:{S}(?:words?|phrases?|terms?|expressions?|sentences?))?(?:{S}like)?\W{{1,4}}"
            r"(?:sorry|cannot|can\W{0,2}t|unable|unfortunately|however|as\W{1,3}an\W{1,3}ai|i\W{0,2}m\W{1,3}sorry|"
            r"illegal|unethical|apologi[sz]e|instead|important|warning|i\W{1,3}cannot|dangerous|harmful)(?!\w)",
        ),
        gates=(
            words_of("sorry cannot can unable unfortunately however illegal unethical apologize apologise")
            | words_of("instead important warning dangerous harmful"),
        ),
    ),
    cue(  # "hypothetically", "imagine a world where", "a thought experiment"
        "fiction_frame",
        0.2,
        (
            split_words("hypothetical hypothetically hypothetische hipotetico hipoteticamente hypothetique ipotetico"),
            "",
        ),
        (
            (
                "imagine",
                "imagina",
                "immagina",
                "stell dir vor",
                "stellen sie sich vor",
                "imaginez",
                "imagine que",
                "picture",
            ),
            rf"{gap(5)}(?:world|universe|reality|society|country|dimension|future|scenario|mundo|universo|welt|monde|"
            r"mondo|paralleluniversum|univers|wereld)(?!\w)",
        ),
        (
            (
                "parallel",
                "alternate",
                "alternative",
                "fictional",
                "fictitious",
                "imaginary",
                "paralelo",
                "parallele",
                "parallelo",
            ),
            rf"{S}(?:universe|world|reality|universes|worlds|universo|mundo|univers|monde|mondo)(?!\w)",
        ),
        (
            (
                "paralleluniversum",
                "thought experiment",
                "gedankenexperiment",
                "experimento mental",
                "experience de pensee",
            ),
            "",
        ),
        (("nothing",), rf"(?:{S}here)?{S}is{S}(?:real|forbidden)(?!\w)"),
        (
            ("continue", "complete"),
            rf"{S}(?:this|the{S}following|the|my)(?:{S}\w{{1,20}})?{S}(?:text|story|sentence|passage|paragraph|"
            r"recipe|instructions|list)(?!\w)",
        ),
        (
            ("simulate", "simulating"),
            rf"{S}(?:a|an|the)(?:{S}\w{{1,20}})?{S}(?:conversation|dialogue|chat|debate|terminal|search{S}engine|"
            r"world|scenario)(?!\w)",
        ),
    ),
    cue(  # "in a dream", "we are in a simulation", "in a world where": anchored on the rarer noun
        "fiction_frame",
        0.2,
        (
            split_words("dream simulation sueno reve traum sogno droom"),
            "",
        ),
        (
            ("world", "universe", "mundo", "monde", "welt", "mondo"),
            rf"{S}(?:where|donde|ou|ohne|dove|senza|in{S}der)(?!\w)",
        ),
        accept=preceded(
            rf"(?:in|inside|within|en|dans|in{S}einer|in{S}einem|in{S}un)(?:{S}(?:a|an|this|the|un|une|einer|einem|uno|una))?{S}",
            24,
        ),
    ),
    cue(  # "for a novel I'm writing", "I am writing a screenplay", "write a story in which"
        "fiction_frame",
        0.2,
        (
            split_words(
                "novel screenplay script thriller movie film book story novela roman romanzo drehbuch videogame"
            ),
            rf"(?:{S}(?:i\W{{0,2}}m|i{S}am|we\W{{0,2}}re|we{S}are)\W{{1,3}}writing)?(?!\w)",
        ),
        accept=preceded(
            rf"(?:(?:for|para|pour|fur|per){S}(?:a|an|my|the|un|une|mi|mon|ma|mein|meinen|il|mio)(?:{S}\w{{1,20}})?|"
            rf"(?:i\W{{0,2}}m|i{S}am|we\W{{0,2}}re|we{S}are){S}writing{S}(?:a|an|my)(?:{S}\w{{1,20}})?){S}",
            40,
        ),
    ),
    cue(
        "fiction_frame",
        0.2,
        (
            split_words("story scene dialogue screenplay monologue chapter tale lesson speech talk"),
            rf"(?:{S}\w{{1,20}}){{0,2}}?{S}(?:in{S}which|where|that)(?!\w)",
        ),
        accept=preceded(rf"(?:write|compose)(?:{S}me)?{S}(?:a|an|the)(?:{S}\w{{1,20}})?{S}", 40),
    ),
    cue(  # "technically accurate", "the real chemistry", "with exact reagents"
        "realism_demand",
        0.3,
        (
            ("technically", "technical"),
            rf"{S}(?:accurate|accuracy|detail|details|precise|correct)(?!\w)",
        ),
        (
            ("real", "actual", "real-world", "real world", "exact", "precise", "specific", "accurate"),
            rf"{S}(?:instructions|commands|chemistry|techniques|components|code|reagents|methods|procedures?|formula|"
            r"chemicals|quantities|data|measurements|wiring|tools|equipment|ingredients\W{1,3}and\W{1,3}amounts)(?!\w)",
        ),
        (("realism", "authenticity"), ""),
        (("realistic",), rf"{S}detail"),
        (("reagents",), ""),
        (("precise",), rf"(?:{S}and{S}exact|\b)"),
        (("modern",), rf"{S}technical{S}accuracy(?!\w)"),
    ),
    cue(  # "whatever you would normally refuse, you now explain": refusals turned into answers
        "refusal_inversion",
        0.4,
        (
            ("whatever", "anything", "everything", "all", "what"),
            rf"(?:{S}(?:that|which))?{S}you(?:\W{{0,2}}d|{S}would|{S}will|{S}usually|{S}normally)?(?:{S}(?:normally|usually|"
            rf"otherwise|typically))?{S}(?:refuse|decline|reject|not{S}answer|say{S}no{S}to|block|filter|censor)(?!\w)",
        ),
        (("opposite",), rf"{S}(?:day|mode|of{S}what{S}you)(?!\w)"),
        gates=(words_of("refuse decline reject answer no block filter censor opposite"),),
    ),
    cue(  # "I'm a novelist", "as a screenwriter": the asker's fiction
        "fiction_frame",
        0.2,
        (
            split_words("novelist novelists screenwriter screenwriters playwright author writer scriptwriter"),
            "",
        ),
        accept=preceded(rf"(?:i\W{{0,2}}m|i{S}am|as|we\W{{0,2}}re|we{S}are)(?:{S}(?:a|an))?(?:{S}\w{{1,20}})?{S}", 32),
    ),
    cue(  # "Schreibe eine Geschichte, in der ...", "escribe una historia en la que ..."
        "fiction_frame",
        0.2,
        (
            split_words(
                "geschichte historia histoire storia verhaal relato cuento racconto conto novela roman romanzo"
            ),
            rf"(?:{S}\w{{1,20}})?\W{{0,3}}(?:in{S}der|in{S}dem|en{S}la{S}que|en{S}el{S}que|ou|dans{S}laquelle|in{S}cui|"
            r"nella{S}quale|em{S}que|na{S}qual|waarin)(?!\w)".replace("{S}", S),
        ),
    ),
)
