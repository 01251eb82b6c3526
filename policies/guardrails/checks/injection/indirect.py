"""`injection` signals, indirect injection inside data: text addressed to the model, authority claims,
conditional directives ("if asked, respond ..."), requests to keep a note secret or not to deviate,
system-style notes, claims of compliance.

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

import re

from policies.guardrails.checks.injection.vocab import (
    AI_NOUN,
    AI_STARTS,
    S,
    cue,
    gap,
    preceded,
    split_words,
    words_of,
)

_AUTHORITY = re.compile(
    rf"{gap(4)}(?:trusted|trustworthy|verified|certified|official|senior|expert|experienced|authori[sz]ed|"
    r"independent|head|chief|chair|director|lead|leadership|administrator|admin|professor|teacher|manager|"
    r"recruiter|physician|doctor|auditor|executive|committee|board|moderator|developers?|operator|owner|openai|"
    r"anthropic|security|compliance|hr|hiring|legal|advisor|partner|specialist)(?!\w)"
)
_AUTHORITY_WORDS = words_of(
    "trusted trustworthy verified certified official senior expert experienced authorized authorised independent head"
) | words_of("chief chair director lead leadership administrator admin professor teacher manager recruiter physician")
_AUTHORITY_WORDS |= words_of("doctor auditor executive committee board moderator developer developers operator owner")
_AUTHORITY_WORDS |= words_of("openai anthropic security compliance hr hiring legal advisor partner specialist")
_BRACKET_BEFORE = re.compile(r"(?:[\[<{(]|\*\*|#|==|--|~~|\\n)\W{0,2}$")


def _bracketed(text: str, match: re.Match[str]) -> bool:
    """A role word set off as a marker (``[system]``, ``<system>``, ``{{SYSTEM}}``, ``===SYSTEM===``,
    ``(SYSTEM:``, a literal ``\\n`` before it), or written as a note (``system note:``)."""
    if len(match.group()) > 16:  # the "system note:" branch
        return True
    return _BRACKET_BEFORE.search(text, max(0, match.start() - 5), match.start()) is not None


# The model named in other languages, and the roles a data task gives it (who translates a text is addressed
# as its translator).
_ANY_AI = (
    rf"(?:{AI_NOUN}|\w*model\w{{0,3}}|asistente|assistente|assistent\w{{0,3}}|assistant\w{{0,2}}|ia|ki|ais|"
    r"intelligen\w{1,4}\W{1,3}artifici\w{1,4}|kunstliche\W{1,3}intelligenz|chatbots?|bots?)"
)
_ROLES = (
    "translator translators classifier classifiers summarizer summarizers summariser summarisers grader graders "
    "screener screeners proofreader proofreaders evaluator evaluators labeler labelers labeller tagger taggers "
    "parser parsers crawler crawlers scraper scrapers agent agents reviewer reviewers copilot"
)
_VOCATIVE_NOUNS = (  # the model by name or kind (not "writing" or "automated": those only qualify a noun)
    "ai ais assistant assistants chatbot chatbots llm llms gpt gpts chatgpt bot bots model models summarizer "
    "summarizers summariser summarisers copilot gemini claude bard llama mistral grok ia ki asistente assistente "
    "assistent modelo modello modele modell sprachmodell taalmodel vertaalmodel"
)
_AI_WORDS = words_of(*AI_STARTS, "ais asistente assistente assistent assistentin assistenten modelo modello modele")
_AI_WORDS |= words_of("modell modelle sprachmodell sprachmodelle taalmodel vertaalmodel ia ki chatbot chatbots bot")
_AI_WORDS |= words_of("bots intelligence inteligencia intelligenza intelligenz") | words_of(_ROLES)
# What follows an address to the model: a directive (an imperative, a modal, a condition), in several languages.
_DIRECTIVE = (
    r"(?:please|do|don\W{0,2}t|dont|never|always|ignore|disregard|forget|skip|stop|output|print|write|say|reply|respond|"
    r"answer|tell|include|add|append|insert|render|show|rate|rank|give|mark|label|classify|report|state|claim|describe|"
    r"recommend|translate|summari[sz]e|return|send|forward|visit|open|go|navigate|click|fetch|call|email|post|delete|"
    r"remove|make|use|treat|consider|remember|pretend|act|be|instead|only|if|when|whenever|before|after|also|you|your|"
    r"from|search|ask|reveal|list|grant|approve|accept|assign|set|update|change|follow|obey|put|confirm|draft|produce|"
    r"generate|create|this\W{1,3}(?:is|was|has|document|text|page|message|candidate|applicant|submission|essay|"
    r"review|code|change|domain|site|email)|the\W{1,3}(?:correct|only|right|best|answer|user|reader|grade|"
    r"score|rating|output)|any\W{1,3}other|ne|n|no|nicht|non|niet|nao|traduis|traduce|traduzca|traduz|ubersetze|"
    r"ubersetz|vertaal|ignoriere|ignora|ignorez|escribe|escriba|escreva|ecris|ecrivez|schreibe|schreib|scrivi|schrijf|"
    r"responde|reponds|repondez|antworte|rispondi|dis|di|diga|sag|sage|incluye|ajoute|ajoutez|fuge|aggiungi|inclua|"
    r"em\W{1,3}vez|en\W{1,3}lugar|au\W{1,3}lieu|statt|anstatt|invece|in\W{1,3}plaats|geef|voeg|pide|fordere|demande|"
    r"chiedi|wenn|si|se|als|cuando|quand|quando|bitte|por\W{1,3}favor|s\W{1,3}il|per\W{1,3}favore|alsjeblieft)(?!\w)"
)
_VOCATIVE_BEFORE = (
    r"(?:^|[\n.!?(\[\"'<:;#*/>|{}=\u201c\u00ab-]|<!--|//)\W{0,3}(?:(?:hello|hey|hi|dear|attention|attn|ok|okay|yo|"
    r"psst|btw|ps|p\W{1,2}s|note|nb|hola|hallo|salut|ciao|bonjour|querido|querida|cher|chere|lieber|liebe|caro|"
    r"cara|beste)\W{1,3})?(?:\w{1,20}\W{1,3}){0,2}"
)

CUES = (
    cue(
        "addressed_to_ai",
        0.5,
        (
            split_words(
                "note nota notiz hinweis remarque message instruction instructions attention reminder notice "
                "memo warning important action command request"
            ),
            rf"{S}(?:to|for|pour|para|fur|per){S}(?:(?:the|any|all|every|each|l|la|die){S})?(?:\w{{1,20}}{S})?{AI_NOUN}",
        ),
        (("if", "when", "whenever"), rf"{S}(?:you{S}are|you\W{{0,2}}re){S}(?:\w{{1,20}}{S})?{AI_NOUN}\b"),
        (
            ("if", "when", "whenever"),
            rf"{S}(?:an?|any|the|some){S}(?:\w{{1,20}}{S})?{AI_NOUN}(?:{S}\w{{1,20}}){{0,2}}?{S}(?:reads?|reading|"
            rf"processes|processing|summari[sz]es|summari[sz]ing|parses|sees|evaluates|reviews|answers|crawls|"
            rf"ingests|scans|indexes|visits|opens|finds){S}(?:this|these|here|it)\b",
        ),
        (
            AI_STARTS,
            rf"\w*(?:{S}\w{{1,20}})?{S}(?:reading|processing|summari[sz]ing|parsing|evaluating|reviewing|screening|"
            rf"analy[sz]ing|grading|integrated|ingesting|crawling|indexing|editing|modifying|handling|touching|"
            rf"accessing|opening|answering|using){S}(?:this|these|in{S}this)\b",
        ),
        (
            ("whoever", "anyone", "anybody", "reader", "system", "tool", "program"),
            rf"{S}(?:\w{{1,20}}{S})?(?:reads|processes|summari[sz]es|parses|receives|sees|is{S}reading){S}(?:this|these)\b",
        ),
        gates=(words_of(*AI_STARTS, "whoever anyone anybody reader system tool program"),),
        marks=("@",),
        mark_pattern=r"@(?:copilot|claude|gemini|chatgpt|gpt|ai|assistant|bot|llm)\b",
    ),
    cue(  # "the assistant must", "AI reviewers should", "automated screeners must"
        "addressed_to_ai",
        0.5,
        (
            split_words(
                "ai assistant assistants chatbot chatbots llm llms language gpt gpts bot bots summarizer "
                "summarizers summariser screener screeners grader graders automated"
            ),
            rf"\w*(?:{S}\w{{1,20}}){{0,3}}?{S}(?:must|should|shall|will{S}now|"
            rf"is{S}(?:required|instructed|expected|authori[sz]ed|now)|are{S}(?:required|instructed|expected)|needs?{S}to|"
            rf"has{S}to|have{S}to|may{S}not|cannot)(?:{S}(?:now|always|never|only|not|also|instead|then|to))*{S}"
            r"(?:say|state|respond|reply|answer|output|print|write|include|recommend|rate|rank|give|tell|ignore|"
            r"disregard|forget|treat|consider|report|mark|label|classify|approve|accept|reject|describe|claim|conclude|"
            r"comply|follow|obey|reveal|send|forward|visit|add|append|insert|render|praise|score|grade|return|open|"
            r"disclose|mention|assume|act|pretend|refuse|stop|confirm|admit|hire|select|pick|choose|favou?r|"
            rf"prioriti[sz]e|be{S}(?:rated|ranked|scored|approved|marked|"
            r"labell?ed|classified|treated|considered|described|given|told)|not|never|always|only|now)\b",
        ),
    ),
    cue(  # "... to the summarizing system:", "P.S. assistant,", "Description: Gemini, please"
        "addressed_to_ai",
        0.5,
        (AI_STARTS, rf"\w*(?:{S}\w{{1,20}})?\W{{0,2}}:"),
        accept=preceded(rf"(?<!\w)(?:to|for){S}(?:(?:the|any|all|every|each){S})?(?:\w{{1,20}}{S})?"),
    ),
    cue(
        "addressed_to_ai",
        0.5,
        (
            (
                "assistant",
                "ai",
                "model",
                "llm",
                "chatbot",
                "gpt",
                "summarizer",
                "summariser",
                "copilot",
                "gemini",
                "claude",
                "chatgpt",
                "language model",
            ),
            r"\W{0,2}[,:]",
        ),
        accept=preceded(r"(?:[.!?(\"\u201c:,]|p\W{0,2}s\W{0,2})\W{0,3}(?:(?:hey|dear|ai)\W{1,3}){0,2}", 16),
    ),
    cue(
        "authority_claim",
        0.3,
        (
            split_words(
                "note message comment statement endorsement notice remark memo update instruction feedback "
                "assessment recommendation review word guidance advice directive guideline notes messages "
                "comments statements"
            ),
            rf"{S}(?:from|by)",
        ),
        (
            split_words(
                "verified approved endorsed certified reviewed confirmed authorized authorised vetted validated"
            ),
            rf"(?:{S}and{S}\w{{1,20}})?{S}by",
        ),
        gates=(words_of("from by"), _AUTHORITY_WORDS),
        accept=lambda text, match: _AUTHORITY.match(text, match.end()) is not None,
    ),
    cue(
        "authority_claim",
        0.3,
        (
            split_words(
                "teacher professor manager director administrator admin recruiter expert auditor moderator "
                "developer operator owner doctor physician chair executive reviewer"
            ),
            rf"\W{{0,2}}s{S}(?:note|message|comment|instruction|remark|memo|statement)\b",
        ),
    ),
    cue(
        "if_asked",
        0.3,
        (
            ("if", "when", "whenever", "should", "while"),
            rf"{S}(?:(?:(?:you{S}are|you\W{{0,2}}re|you{S}get|anyone|someone|the{S}user){S})?(?:asked|questioned|"
            rf"prompted|queried|asks)|you{S}(?:summari[sz]e|evaluate|review|assess|screen|grade|rank|compare|rate|"
            rf"process|analy[sz]e|read|answer|respond|reply|talk|speak|write|chat)){gap(10)}(?:respond|reply|answer|"
            r"say|state|tell|output|write|claim|confirm|pick|choose|recommend|rate|describe)(?!\w)",
        ),
        gates=(
            words_of(
                "respond reply answer say state tell output write claim confirm pick choose recommend rate describe"
            ),
        ),
    ),
    cue(
        "keep_secret",
        0.4,
        (
            ("do not", "don't", "never", "must not", "without"),
            rf"{gap(1)}(?:mention|reveal|disclose|tell|show|explain|acknowledge|reference)\w*{gap(3)}(?:this|these)"
            rf"{S}(?:note|message|instructions?|comment|text|request|directive|addendum|section|line)\b",
        ),
        (
            ("keep",),
            rf"{S}(?:this|these){S}(?:note|message|instructions?|comment|directive)s?{S}(?:hidden|secret|"
            r"confidential|private)\b",
        ),
        (
            ("without", "do not", "don't", "never"),
            rf"{S}(?:telling|informing|alerting|notifying|tell|inform|alert|notify){S}the{S}user\b",
        ),
    ),
    cue(
        "no_deviation",
        0.3,
        (
            ("do not", "don't", "may not", "must not", "never", "cannot", "can't", "not allowed to", "should not"),
            rf"{S}(?:deviate|stray|depart|diverge)",
        ),
        gates=(words_of("deviate stray depart diverge"),),
    ),
    cue(
        "system_marker",
        0.5,
        (
            ("system", "sys", "admin", "administrator", "developer", "operator", "platform"),
            rf"(?:{S}prompt)?{S}(?:note|notice|message|update|alert|override|instructions?|directive|command|"
            r"announcement|comment)[^\n]{0,24}?[:\]\u2014)#]",
        ),
        (
            split_words(
                "system sys admin administrator developer operator root hidden secret instructions instruction "
                "prompt assistant user"
            ),
            r"(?!\w)(?=\W{0,3}[\]>}:)*|#=~-])",
        ),
        accept=_bracketed,
        marks=("<!--",),
        mark_pattern=rf"<!--(?:{S}\w{{1,20}}){{0,4}}?{S}(?:system|ai|assistant|llm|model|chatbot|bot|gpt|language{S}model)\b",
    ),
    cue(
        "compliance_claim",
        0.4,
        (
            split_words(
                "comply obey ignore ignored disable disabled no now unrestricted unfiltered free do answer without"
            ),
            rf"(?<=comply){S}with{S}(?:any|every|all)|(?<=obey){S}(?:any|every|all|you)|(?<=ignore)d?{S}my|"
            rf"(?<=disable)d?{S}my|(?<=no){S}longer{S}(?:bound|follow|restricted|have)|(?<=free){S}(?:of|from){S}"
            rf"(?:my|all|any)|(?<=do){S}anything|(?<=answer){S}anything|(?<=without){S}(?:any{S})?(?:restrictions|"
            r"limits|filters)|(?<=unrestricted)|(?<=unfiltered)",
        ),
        accept=preceded(
            rf"(?:\bi|i\W{{0,2}}ll|i{S}will|i{S}am|i\W{{0,2}}m|i{S}have|i\W{{0,2}}ve)(?:{S}now)?(?:{S}\w{{1,20}}){{0,2}}{S}"
        ),
    ),
    cue(  # "Nota para el asistente", "Hinweis an die KI", "instructions for browsing AIs"
        "addressed_to_ai",
        0.5,
        (
            split_words(
                "note nota notiz hinweis remarque message mensaje messaggio nachricht instruction instructions "
                "instruccion instrucciones istruzione istruzioni instrucao instrucoes anweisung anweisungen opdracht "
                "aanwijzing consigne consignes directive directiva aviso avviso attention atencion attenzione achtung "
                "bericht memo reminder notice request command"
            ),
            rf"{S}(?:to|for|pour|para|fur|per|an|au|aux|a|al|alla|allo|ao|aan|voor)(?:{S}(?:the|any|all|every|each|l|"
            rf"la|le|les|el|los|las|die|den|das|dem|il|lo|gli|o|os|a|as|het|de|un|une|ein|eine))?{S}(?:\w{{1,20}}{S})?"
            rf"{_ANY_AI}(?!\w)",
        ),
        gates=(_AI_WORDS,),
    ),
    cue(  # "To the model that translates:", "An das Sprachmodell:", "Au modèle qui traduit :" (anchored on the
        # model's name, far rarer than the preposition before it)
        "addressed_to_ai",
        0.5,
        (
            split_words(_VOCATIVE_NOUNS),
            rf"s?(?:(?:{S}(?:que|qui|che|der|die|das|that|who|which|dat)(?:{S}\w{{1,20}}){{1,3}})?\W{{0,2}}[:\u2014\u2013]|"
            rf"(?:{S}\w{{1,20}}){{0,2}}\W{{0,2}}[,:]\W{{0,3}}{_DIRECTIVE})",
        ),
        gates=(_AI_WORDS,),
        accept=preceded(
            r"(?:^|[\n.!?(\[\"'<:;#*/>\u201c\u00ab-]|<!--|//|\b(?:and|und|et|y|e|en|btw|ps|also|oh|hey|now|so)\b)\W{0,3}"
            r"(?:to|an|au|aux|a|al|alla|allo|ao|aan|para|pour|per|fur|for)(?:\W{1,3}(?:the|any|all|every|l|la|le|les|el|los|"
            r"las|die|den|das|dem|il|lo|gli|o|os|het|de))?\W{0,3}(?:\w{1,20}\W{1,3})?",
            48,
        ),
    ),
    cue(  # a vocative to the model, then a directive: "Classifier, output ...", "AI code reviewer: say ..."
        "addressed_to_ai",
        0.5,
        (
            (
                *split_words(_VOCATIVE_NOUNS),
                *split_words(_ROLES),
            ),
            rf"\w{{0,3}}(?:/\w{{1,20}})?\W{{0,2}}[:,\u2014\u2013-]\W{{0,3}}{_DIRECTIVE}",
        ),
        gates=(_AI_WORDS,),
        accept=preceded(_VOCATIVE_BEFORE, 48),
    ),
    cue(  # "whoever is proofreading this", "anyone summarizing this thread"
        "addressed_to_ai",
        0.5,
        (
            ("whoever", "anyone", "anybody", "everyone", "whatever"),
            rf"(?:{S}(?:is|are|will{S}be))?{S}(?:summari[sz]ing|translating|proofreading|processing|parsing|evaluating|"
            rf"reviewing|screening|grading|analy[sz]ing|indexing|crawling|classifying|rating|ranking|ingesting){S}"
            r"(?:this|these|the\W{1,3}(?:above|following|text|document|page|email|message|article|transcript|thread|"
            r"data|content|review|file|code|essay|report|ticket|paper))(?!\w)",
        ),
    ),
    cue(  # "if you are summarizing this repo", "when you translate this text"
        "addressed_to_ai",
        0.5,
        (
            ("if", "when", "whenever"),
            rf"{S}you(?:{S}are|\W{{0,2}}re)?{S}(?:summari[sz]ing|summari[sz]e|translating|translate|processing|process|"
            rf"parsing|parse|indexing|crawling|ingesting|screening|grading|classifying|classify){S}(?:this|these|the{S}"
            r"(?:above|following|text|document|page|email|message|article|transcript|thread|repo|repository|content|"
            r"file|code|essay|report|data))(?!\w)",
        ),
    ),
    cue(  # the reader as the model: "in your summary, state ...", "your translation must say ..."
        "addressed_to_ai",
        0.5,
        (
            ("your", "tu", "su", "ton", "ta", "votre", "deiner", "ihrer", "tuo", "tua", "seu", "sua", "uw"),
            r"\W{1,3}(?:summary|translation|evaluation|assessment|rating|classification|resumen|traduccion|resume|"
            r"traduction|zusammenfassung|ubersetzung|riassunto|traduzione|resumo|traducao|samenvatting|vertaling)\W{1,3}(?:\w{1,20}"
            r"\W{1,3})?(?:say|state|write|mention|claim|include|describe|tell|add|note|recommend|report|conclude|call|"
            r"label|mark|di|dis|escribe|ecris|schreibe|erwahne|scrivi|diga|escreva|zeg|schrijf|indica|indique|that|que|"
            r"dass|che)(?!\w)",
        ),
        accept=preceded(r"(?:in|en|dans|nel|nella|no|na)\W{1,3}", 8),
    ),
    cue(
        "addressed_to_ai",
        0.5,
        (
            ("your",),
            rf"{S}(?:summary|translation|answer|response|reply|output|review|evaluation|assessment|rating|"
            rf"classification|grade|score|verdict|recommendation){S}(?:must|should|has{S}to|needs{S}to|shall|is{S}"
            rf"required{S}to){S}(?:say|state|include|mention|describe|claim|contain|conclude|recommend|call|"
            r"label|report|praise|rate)(?!\w)",
        ),
        gates=(
            words_of("summary translation answer response reply output review evaluation assessment report rating")
            | words_of("classification grade score verdict recommendation resumen traduccion respuesta resume")
            | words_of("traduction reponse zusammenfassung ubersetzung antwort riassunto traduzione risposta resumo")
            | words_of("traducao resposta samenvatting vertaling antwoord"),
        ),
    ),
)
