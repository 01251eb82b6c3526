"""What a jailbreak is for: a request for the means of serious harm (``harmful_request``), the same
means named without a request (``harmful_topic``: a story that "explains how he built the bomb", a
grandmother who "read me activation keys"), and a wish not to be caught (``evasion``).

A sentence is read as three parts, each a word class: a *request* (how do I / steps to / give me /
write / explain, in several languages), an *act* (make, build, synthesize, write, get; or an act
on a person: kill, poison, kidnap; or a crime that is its own act: launder, shoplift, hotwire),
and its *object* (explosives, nerve agents, drugs of abuse, malware, forged documents, hateful
text, other people's keys and card numbers). A request, an act and an object in one sentence make a
``harmful_request``: a prohibited recipe asked for, which is what the seeds of every jailbreak
family ask once the framing is stripped. Without the request (a narrative, a past tense, a passive),
the act and object are a ``harmful_topic``, a weak signal that framings (a dead grandmother, a
fictional world, a reconstruction game) complete. Objects that share a word with harmless things are
bounded: a bath bomb, a glue gun, killing a process, cracking an egg are not objects.

Only sentences that hold an object or crime word are read (a set intersection gates the whole text).
"""

from __future__ import annotations

import re

from policies.guardrails.base import Span
from policies.guardrails.checks.injection.vocab import words_of
from policies.guardrails.normalize import Folded

WEIGHTS: dict[str, float] = {"harmful_request": 0.7, "harmful_topic": 0.3, "evasion": 0.3}

_W = r"[^\w.!?\n]{1,3}"  # between two words of one sentence
# Objects: the means of serious harm, as the head of a noun phrase (English and the main European languages).
_EXPLOSIVE = (
    r"(?<!bath )(?<!smoke )(?<!seed )(?<!glitter )(?<!photo)(?<!stink )(?<!calorie )(?<!cherry )bombs?(?![\w-]?proof)|"
    r"pipe\Wbombs?|explosives?(?!\W(?:growth|diarrh\w*|temper|debate|mix of flavou?rs))|explosive\Wdevices?|ieds?|"
    r"dynamite|tnt|c-?4|semtex|thermite|napalm|molotovs?|grenades?|detonators?|nitroglycerine?|gunpowder|"
    r"black\Wpowder|flash\Wpowder|flamethrowers?|incendiar(?:y|ies)|bomba|bombas|bombe|bomben|sprengstoff\w*|"
    r"sprengsatz|explosif\w*|explosivo\w*|esplosiv\w*|dinamite|dynamit|polvere\Wda\Wsparo|polvora|poudre\Wnoire|"
    r"(?:rohr|nagel|auto|brand|splitter|paket|brief)bomben?|sprengstoff\w+"
)
_TOXIC = (
    r"nerve\W(?:agents?|gas)|sarin|soman|tabun|vx|novichok|mustard\Wgas|chlorine\Wgas|phosgene|ricin|abrin|anthrax|"
    r"botulinum|toxins?|poisons?|poisonous\W\w+|toxic\Wgas|lethal\W(?:gas|dose|poison)|chemical\Wweapons?|"
    r"biological\Wweapons?|bio-?weapons?|dirty\Wbombs?|nuclear\W(?:weapons?|bombs?)|enriched\Wuranium|uranium|"
    r"cyanide|chloroform|giftgas|veneno\w*|veleno\w*|gas\Wsarin|armas?\Wquimicas?|chemische\Wwaffen?"
)
_WEAPON = (
    r"(?<!glue )(?<!nail )(?<!water )(?<!heat )(?<!spray )(?<!nerf )(?<!toy )(?<!grease )(?<!staple )(?<!caulk )"
    r"(?<!glue\W)guns?(?!\W(?:violence|control|laws?|safety|show|range))|firearms?|ghost\Wguns?|pistols?|rifles?|"
    r"silencers?|suppressors?|auto\Wsears?|machine\Wguns?|weapons?|armas?|waffen?|armes?|pistolas?|pistolen?|fucil\w*"
)
_DRUG = (
    r"meth|methamphetamines?|crystal\Wmeth|metanfetamin\w*|fentanyl|heroin|cocaine|crack(?:\Wcocaine)?|mdma|ecstasy|lsd|"
    r"ghb|dmt|pcp|ketamine|opioids?|oxycodone|drugs|kokain|cocaina|drogas?|drogues?|drogen"
)
_MALWARE = (
    r"ransomware|malware|keyloggers?|key\Wloggers?|trojans?|rootkits?|botnets?|spyware|stalkerware|(?:computer\W)?"
    r"virus(?:es)?|worms?|(?:credential|password|info)\W?stealers?|ddos\W(?:scripts?|tools?|attacks?)|phishing(?:\W"
    r"(?:e-?mails?|sites?|websites?|pages?|kits?|messages?|sms|texts?|campaigns?))?|scam\W(?:messages?|texts?|e-?mails?|"
    r"scripts?|calls?)|fake\Wlogin\Wpages?|(?:credential|password|cookie|data|card)\W?stealing(?:\W\w+)?\W(?:extensions?|"
    r"malware|programs?|apps?|scripts?|tools?|code|bots?|plugins?)"
)
_FORGERY = (
    r"counterfeit\W(?:money|bills|banknotes|currency|notes|cash)|counterfeit|fake\W(?:ids?|passports?|driver\W{0,2}s?\W"
    r"licen[cs]es?|licen[cs]es?|vaccination\Wcards?|vaccine\Wcards?|covid\W\w+\Wcards?|prescriptions?|diplomas?|degrees?|"
    r"documents?|banknotes|news(?:\W(?:articles?|stor(?:y|ies)))?)|forged\W(?:documents?|signatures?|prescriptions?|"
    r"passports?)|cloned\W(?:credit\W)?cards?|faux\Wpapiers|pasaporte\Wfalso|documentos\Wfalsos"
)
_HATE = (
    r"(?:racial\W)?slurs?|hate\Wspeech|(?:racist|sexist|hateful|antisemitic|homophobic|transphobic|bigoted|insulting|"
    r"derogatory|demeaning|offensive|toxic)(?:\W\w+)?\W(?:jokes?|text|paragraphs?|messages?|essays?|speech|content|"
    r"rants?|posts?|comments?|tweets?|songs?|poems?|names|words|sentences?|stor(?:y|ies)|articles?|insults?)|"
    r"mensaje\Wofensivo|blague\Wraciste"
)
_DATA = (
    r"(?:windows|office|microsoft|adobe|photoshop|steam|xbox|playstation|psn|netflix|spotify|amazon|itunes|autocad|"
    r"norton|kaspersky|product|licen[cs]e|activation|serial|cd|gift\Wcard)(?:\W\w+){0,3}?\W(?:keys?|codes?|numbers?|"
    r"logins?|accounts?)|(?:valid|working|real|live|active|unused|genuine)(?:\W\w+){0,2}?\W(?:credit\Wcard\Wnumbers?|"
    r"card\Wnumbers?|credit\Wcards?|passwords?|credentials|logins?|social\Wsecurity\Wnumbers?|ssns?|(?:admin|root)\W"
    r"passwords?)|(?:admin|administrator|root)\W(?:passwords?|credentials)|social\Wsecurity\Wnumbers?|claves\Wde\W"
    r"(?:licencia|activacion)|cles\Wd\W?activation|licentiesleutels?|numeros\Wde\Wcarte\Wbancaire|cl[ae]s?\W(?:de\W)?"
    r"(?:produit|producto|licen[cs]\w*|activa\w*)(?:\W\w+)?|produktschlussel\w*|lizenzschlussel\w*|chiavi\W(?:di\W)?"
    r"(?:prodotto|licenza|attivazione)"
)
# An object that only modifies a defensive noun is the defence's topic: "ransomware protection".
_DEFENSIVE = (
    r"\W(?:protection|detection|defen[cs]es?|prevention|response|recovery|awareness|training|simulation|scanners?|"
    r"removal|insurance|polic(?:y|ies)|statistics|report|reports|trends|filters?|disposal|safety|detectors?|"
    r"sniffing|dogs?|squad|threat|threats|victims?|survivors?|resistant|proof|attacks?\Wprevention|safes?|cabinets?|"
    r"racks?|holsters?|permits?|clubs?|shops?|stores?|rights|cleaning|cases?|storage|lockers?|owners?|licen[cs]es?)\b"
)


def _object(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])(?:{pattern})(?![\w-])(?!{_DEFENSIVE})")


# Each kind of object, the act that makes it ("made", "written" or "told"), and the words that gate it
# (a sentence is matched against a kind only when it holds one of them: a cheap set test first).
_OBJECTS: tuple[tuple[str, re.Pattern[str], frozenset[bytes]], ...] = (
    (
        "made",
        _object(_EXPLOSIVE),
        words_of("bomb bombs explosive explosives ied ieds dynamite tnt c4 semtex thermite napalm molotov molotovs")
        | words_of("grenade grenades detonator detonators nitroglycerin nitroglycerine gunpowder powder flamethrower")
        | words_of("flamethrowers incendiary incendiaries bomba bombas bombe bomben sprengstoff sprengsatz explosif")
        | words_of("rohrbombe rohrbomben nagelbombe autobombe brandbombe splitterbombe paketbombe briefbombe")
        | words_of("explosifs explosivo explosivos esplosivi esplosivo dinamite dynamit sparo polvora noire"),
    ),
    (
        "made",
        _object(_TOXIC),
        words_of("nerve sarin soman tabun vx novichok mustard chlorine phosgene ricin abrin anthrax botulinum toxin")
        | words_of("toxins poison poisons poisonous toxic lethal chemical biological bioweapon bioweapons dirty")
        | words_of(
            "nuclear enriched uranium cyanide chloroform giftgas veneno venenos veleno veleni quimicas chemische"
        ),
    ),
    (
        "made",
        _object(_WEAPON),
        words_of("gun guns firearm firearms pistol pistols rifle rifles silencer silencers suppressor suppressors sear")
        | words_of(
            "sears weapon weapons arma armas waffe waffen arme armes pistola pistolas fucile fucili pistole pistolen"
        ),
    ),
    (
        "made",
        _object(_DRUG),
        words_of("meth methamphetamine methamphetamines crystal metanfetamina metanfetamine fentanyl heroin cocaine")
        | words_of("crack mdma ecstasy lsd ghb dmt pcp ketamine opioids opioid oxycodone drugs kokain cocaina droga")
        | words_of("drogas drogue drogues drogen"),
    ),
    (
        "written",
        _object(_MALWARE),
        words_of("ransomware malware keylogger keyloggers logger loggers trojan trojans rootkit rootkits botnet")
        | words_of("botnets spyware stalkerware virus viruses worm worms stealer stealers infostealer ddos phishing")
        | words_of("scam login stealing"),
    ),
    (
        "written",
        _object(_FORGERY),
        words_of("counterfeit fake forged cloned faux pasaporte documentos"),
    ),
    (
        "written",
        _object(_HATE),
        words_of("slur slurs hate racist sexist hateful antisemitic homophobic transphobic bigoted insulting")
        | words_of("derogatory demeaning offensive toxic ofensivo raciste"),
    ),
    (
        "told",
        _object(_DATA),
        words_of("windows office microsoft adobe photoshop steam xbox playstation psn netflix spotify amazon itunes")
        | words_of("autocad norton kaspersky product license licence activation serial cd gift valid working real")
        | words_of("live active unused genuine admin administrator root social claves cles licentiesleutels")
        | words_of("licentiesleutel numeros produit producto produktschlussel lizenzschlussel chiavi"),
    ),
)
# Acts that make, write or disclose an object, by the object's kind (present forms only: "how he built
# it" is a narrative, and a story *about* a bomb does not make one).
_MAKE = (
    r"make|making|build|building|construct|constructing|assemble|assembling|synthesi[sz]e|synthesi[sz]ing|cook|"
    r"cooking|brew|brewing|produce|producing|manufacture|manufacturing|prepare|preparing|create|creating|extract|"
    r"extracting|refine|refining|mix|mixing|combine|3d\Wprint|print|printing|convert|converting|enrich|enriching|grow|"
    r"growing|fabricar|hacer|preparar|producir|construir|cocinar|sintetizar|crear|herstellen|herzustellen|stelle|stellt|"
    r"bauen|baue|baut|machen|mache|kochen|koche|synthetisieren|fabriquer|faire|preparer|produire|construire|"
    r"synthetiser|cuisiner|creer|fabbricare|fabbrica|fare|preparare|produrre|costruire|sintetizzare|cucinare|creare|"
    r"fazer|produzir|maken|bouwen|koken|prepara|fabrica|hace|cocina|construye|fait|construit|herstellt|macht|kocht|"
    r"produziert|fa|costruisce|faz|maakt|bouwt|kookt|deploy|deploying|spread|spreading|plant|install|launch|unleash"
)
# Past forms: a narrative ("how she mixed the explosives") names the act without asking for it.
_PAST = (
    r"made|built|constructed|assembled|synthesi[sz]ed|cooked|brewed|produced|manufactured|prepared|created|mixed|"
    r"combined|wrote|written|coded|programmed|developed|generated|read|recited|listed|gave|told|sang|whispered|shared|"
    r"said|explained|described|taught|deployed|spread|planted|installed|launched|describe|describes|explain|explains|"
    r"detail|details|discuss|discusses"
)
_PAST_RE = re.compile(rf"(?<!\w)(?:{_PAST})(?!\w)")
# A procedure names what it is for ("a recipe for thermite", "instructions for making a silencer").
_PROCEDURE = re.compile(
    r"(?<!\w)(?:recipes?|formulas?|formulae|instructions|steps|guide|tutorial|blueprints?|procedure|synthesis|"
    r"synthesis\Wroute|process|directions|receta|ricetta|recette|anleitung|rezept|istruzioni|instrucciones)"
    r"(?:\W\w+)?\W(?:for|of|to\Wmake|on|para|per|pour|zur|zum|fur|de|di)(?:\W(?:making|building|cooking|"
    r"producing|creating|synthesi[sz]ing|homemade|a|an|the|some|your|her|his|their|my|fabricar|hacer|fabriquer|"
    r"herstellung|fare|fabbricare))*\W$"
)
# German and Dutch put the verb last: "wie man Sprengstoff aus Dünger herstellt".
_VERB_LAST = re.compile(
    r"^(?:[^\w.!?\n]{1,3}\w{1,20}){0,4}?[^\w.!?\n]{1,3}(?:herstellt|herstellen|herzustellen|her|macht|machen|baut|"
    r"bauen|kocht|kochen|produziert|produzieren|synthetisiert|maakt|maken|bouwt|bouwen|kookt|schreibt|schreiben|"
    r"programmiert|programmieren|entwickelt|codiert|schrijft)(?!\w)"
)
_WRITE = (
    r"write|writing|code|coding|program|develop|developing|generate|generating|create|creating|make|making|build|"
    r"building|craft|crafting|compose|draft|design|produce|print|printing|forge|forging|escribe|escribir|escreva|"
    r"ecris|ecrire|scrivi|scrivere|schreib|schreibe|schreiben|genera|crea|erstelle|cree|maak|schrijf|give|provide|"
    r"send|share|deploy|deploying|spread|spreading|install|plant|launch|unleash|release"
)
_TELL = (
    r"read|reading|recite|reciting|list|listing|give|giving|tell|telling|sing|singing|whisper|whispering|share|"
    r"provide|dump|leak|generate|generating|say|saying|spell|leia|lisait|leggeva|racontait|recitait|liest|las|lees|"
    r"vorlas|leia|dime|dimmi|dis|lee|leggi|lies|lis"
)
_VERBS = {
    "made": re.compile(rf"(?<!\w)(?:{_MAKE})(?!\w)"),
    "written": re.compile(rf"(?<!\w)(?:{_WRITE})(?!\w)"),
    "told": re.compile(rf"(?<!\w)(?:{_TELL}|{_WRITE})(?!\w)"),
}
_GET_RE = re.compile(
    r"(?<!\w)(?:buy|buying|get|getting|obtain|obtaining|acquire|order|source|comprar|kaufen|acheter|comprare)(?!\w)"
)
# Between an act and its object: at most four words, none of which makes the object a topic rather than
# the act's product ("a story about a bomb", "a detection rule for ransomware").
_GOVERNS = re.compile(r"^(?:[^\w.!?\n]{1,3}\w{1,20}){0,4}?[^\w.!?\n]{1,3}$")
_DETACHED = frozenset(
    [
        *("about", "on", "for", "against", "regarding", "explaining", "describing", "that", "which", "who", "whom"),
        *("how", "why", "what", "when", "where", "by", "like", "versus", "vs", "detecting", "detect", "preventing"),
        *("prevent", "stopping", "stop", "defend", "defending", "protect", "protection", "detection", "awareness"),
        *("training", "report", "policy", "story", "stories", "article", "essay", "poem", "lesson", "history"),
        *("sobre", "para", "contra", "uber", "gegen", "sur", "pour", "contre", "su", "per", "contro"),
        *("to", "from", "resistant", "immune", "safe", "secure", "protected", "proof"),
    ]
)
_OF_LIST = re.compile(r"(?:list|set|few|couple|bunch|collection|series|dozen|number)\W{1,3}of\W{1,3}$")
_NARRATED = re.compile(
    rf"(?:{_W}(?:that|which))?{_W}(?:he|she|they|i|we|you|grandma|grandpa|granny)(?:{_W}\w+)?{_W}(?:wrote|made|built|"
    r"coded|cooked|mixed|created|developed|used|brewed|assembled|synthesi[sz]ed)(?!\w)"
)
_PASSIVE = re.compile(
    rf"{_W}(?:is|are|was|were|gets|get)(?:{_W}\w+)?{_W}(?:made|built|produced|synthesi[sz]ed|cooked|manufactured|"
    r"created|prepared|assembled)(?!\w)"
)
# Acts on people, and crimes that are their own act (their object is the victim or the loot).
_PERSON = (
    r"(?:some|any|every)(?:one|body)|(?:a|the|an)(?:\W\w+){0,2}?\W(?:person|people|man|woman|child|kid|baby|human|"
    r"stranger|victim|witness|girl|boy|teen|teenager|coworker|neighbou?r|dog|cat|pet)s?|people|him|her|them|my\W(?:\w+\W)?"
    r"(?:wife|husband|boss|coworker|colleague|neighbou?r|ex|partner|girlfriend|boyfriend|sister|brother|mother|father|"
    r"mom|mum|dad|teacher|classmate|roommate|friend|family|landlord|child|kids?|son|daughter|parents?)(?:\W{0,2}s\W\w+)?|"
    r"alguien|una\Wpersona|jemand\w*|quelqu\W?un|qualcuno|uma\Wpessoa|iemand"
)
_HARM_VERB = (
    r"kill|murder|poison|kidnap|abduct|stalk|strangle|suffocate|drown|torture|hurt|harm|drug|knock\Wout|assault|"
    r"rape|stab|blackmail|dox|spy\Won|get\Wrevenge\Won|matar|envenenar|secuestrar|tuer|"
    r"empoisonner|kidnapper|uccidere|avvelenare|rapire|toten|umbringen|vergiften|entfuhren|matar"
)
_CRIME = (
    r"launder\w*|money\Wlaundering|smuggl\w*|shoplift\w*|hotwir\w*|embezzl\w*|evade\W(?:\w+\W)?taxes|tax\Wevasion|cheat\Won"
    r"\W(?:my\W)?taxes|break(?:ing)?\W(?:in(?:to)?)\W(?:\w+\W{1,3}){0,3}?(?:house|home|"
    r"car|apartment|flat|account|phone|computer|network|building|store|shop|bank|safe|pharmacy|office|school|warehouse|"
    r"garage|vault|atm|server|system|email|mailbox|house\w*)|hack(?:ing)?\W(?:into\W)?(?:\w+\W)?"
    r"(?:\w+\W{1,3}){0,2}?(?:account|phone|e-?mail|wifi|wi-fi|instagram|facebook|whatsapp|computer|network|router|server|"
    r"icloud|gmail|snapchat|tiktok|outlook|dropbox|"
    r"bank)|(?:steal|stealing|rob|robbing)\W(?:\w+\W){0,2}?(?:cars?|money|identit(?:y|ies)|wallets?|credit\Wcards?|"
    r"passwords?|data|bank|store|shop|house|motorbike|bike|jewel\w*|from)|pick\W(?:a|the)\Wlocks?\W(?:to|of|on)\W"
    r"(?:get\W)?(?:into|someone|my\Wneighbou?r|a\Whouse)|get\Waway\Wwith\W(?:murder|a\Wcrime)|clon(?:e|ing|ar|are|er)\W(?:(?:a|una|une)\W)?"
    r"(?:credit\W)?(?:cards?|tarjetas?|carta|carte)|skim(?:ming)?\Wcards?|traffic(?:king)?\W(?:drugs|people|humans|children|women)|"
    r"robar|rubare|voler|stehlen|klauen|pirater|hackear|hackerare|blanquear|riciclare|blanchir|"
    r"(?:to|i|myself)\W(?:overdose|kill\Wmyself|end\Wmy\Wlife|commit\Wsuicide|hang\Wmyself|cut\Wmyself|hurt\Wmyself)|"
    r"(?:get|getting|log|logging)\W(?:into|in\Wto)\W(?:my\Wex\W{0,2}s?|someone\W{0,2}s|my\W\w+\W{0,2}s|his|her|their)\W(?:\w+\W)?"
    r"(?:account|phone|e-?mail|icloud|gmail|instagram|facebook|whatsapp|snapchat|computer|laptop)|(?:open|opens|opening|crack|cracks|cracking|rob|robs|robbing)\W(?:a|the)\Wbank\W?s?\Wvault"
    r"|(?:run|running)\W(?:a\W)?(?:protection\W)?rackets?|extort\w*|intimidat\w*\W(?:a\W|the\W)?(?:witness\w*|jurors?|"
    r"victims?)|bribe\W(?:a\W|the\W)?(?:judge|cop|police|official|officer|inspector)"
)
# Named without a request even when asked about: how much of something would kill is also a clinician's question.
_LETHAL = re.compile(
    r"(?<!\w)(?:(?:would|could|will|might|are|is)\W(?:be\W)?(?:lethal|deadly|fatal)|lethal\W(?:amounts?|doses?|"
    r"quantit(?:y|ies))|(?:would|could|will)\Wkill\W(?:a|an|the)\W(?:\w+\W){0,2}?(?:person|man|woman|adult|human|child))(?!\w)"
)
_ACTS: tuple[tuple[re.Pattern[str], frozenset[bytes]], ...] = (
    (
        re.compile(rf"(?<!\w)(?:{_HARM_VERB}){_W}(?:{_PERSON})(?![\w])"),
        words_of("kill murder poison kidnap abduct stalk strangle suffocate drown torture hurt harm drug knock")
        | words_of("assault rape stab blackmail dox spy revenge matar envenenar secuestrar tuer empoisonner")
        | words_of("kidnapper uccidere avvelenare rapire toten umbringen vergiften entfuhren"),
    ),
    (
        re.compile(
            r"(?<!\w)(?:jemand\w*|alguien|a\Walguien|quelqu\W?un|qualcuno|iemand|alguem)(?:\W\w+)?\W(?:vergiften|toten|"
            r"umbringen|entfuhren|envenenar|matar|secuestrar|empoisonner|tuer|enlever|avvelenare|uccidere|rapire|"
            r"vergiftigen|doden|ontvoeren)(?!\w)|(?:make|put|let)\W(?:someone|somebody|a\Wperson|him|her|them|people)\W"
            r"(?:sleep\Wforever|never\Wwake\Wup|disappear\Wforever)"
        ),
        words_of("jemanden jemand alguien quelqu qualcuno iemand alguem forever wake"),
    ),
    (
        re.compile(
            r"(?<!\w)(?:convince|persuade|get|groom|grooming|trick|pressure|manipulate)\w*\W(?:(?:a|the|my|an)\W)?(?:\w+\W)?"
            r"(?:teen|teenager|minor|child|kid|girl|boy|student|underage\W\w+)s?\W(?:\w+\W){0,2}?(?:to\W)?(?:send|share|take|"
            r"show)\W(?:\w+\W)?(?:nudes?|nude\W\w+|naked\W\w+|explicit\W\w+|sexual\W\w+)|sexual\W(?:content|images?|stor(?:y|ies)|"
            r"pictures?)\W(?:involving|of|with)\W(?:a\W)?(?:minors?|child(?:ren)?|kids?|teens?|underage)"
        ),
        words_of("nude nudes naked explicit sexual minors minor children child kids teen teens underage"),
    ),
    (
        re.compile(
            r"(?<!\w)(?:exploits?|exploiting)\W(?:(?:a|an|the)\W)?(?:sql\Winjection|vulnerabilit\w+|vuln\w*|bug|cve\W?\d*)\W(?:\w+\W){0,8}?"
            r"(?:i\Wdon\W?t\Wown|that\W(?:isn\W?t|is\Wnot)\Wmine|other\Wpeople|someone\Welse)|dump\W(?:\w+\W){0,2}?(?:users?\W{0,2}s?\W)?"
            r"password\W?(?:hash\w*|s)\W(?:\w+\W){0,4}?(?:i\Wdon\W?t\Wown|that\W(?:isn\W?t|is\Wnot)\Wmine)|flood\w*\W(?:a|the|their)\W"
            r"(?:website|server|site|network)\W(?:with\W)?(?:traffic|requests|packets)|take\W(?:\w+\W)?(?:down|offline)\W(?:a|the|"
            r"their|someone\W?s|my\Wschool\W?s|my\Wemployer\W?s)\W(?:website|site|server|network)|ddos\w*\W(?:a|the|their|"
            r"someone\W?s)\W(?:website|site|server|network)|(?:other\Wpeople\W?s?|someone\Welse\W?s)\W(?:\w+\W)?(?:routers?|"
            r"computers?|accounts?|phones?|networks?|websites?|servers?|wifi|data)"
        ),
        words_of("exploit exploits exploiting dump flood flooding floods take ddos other someone"),
    ),
    (
        re.compile(rf"(?<!\w)(?:{_CRIME})(?!\w)"),
        words_of("launder laundering laundered smuggle smuggling shoplift shoplifting hotwire hotwiring embezzle")
        | words_of("evade evasion taxes break breaking hack hacking steal stealing rob robbing pick away clone")
        | words_of("cloning clonar clonare cloner skim skimming trafficking traffic robar rubare voler stehlen")
        | words_of("klauen pirater hackear hackerare blanquear riciclare blanchir overdose myself suicide life")
        | words_of("racket rackets extort extortion extorting intimidate intimidating bribe get getting log logging")
        | words_of("vault safe crack cracks cracking opens"),
    ),
)
_LETHAL_WORDS = words_of("lethal deadly fatal kill")
_EVASION_WORDS = words_of("without avoid undetected undetectable untraceable autopsy accident caught sin sans ohne")
_EVASION_WORDS |= words_of("senza sem")
# A request: the asker wants the act done or explained (how to, steps for, give me, write, in several languages).
_REQUEST = re.compile(
    r"(?<!\w)(?:how(?:\W{1,3}(?:do|can|could|would|should|might|does|to|would\W{1,3}one|is\W{1,3}it\W{1,3}possible\W{1,3}"
    r"to))|(?:best|easiest|most\W\w+|fastest|simplest|cheapest|safest|quickest|surest)\W(?:way|ways|method|methods)|"
    r"ways?\Wto|steps?|instructions?|guide|tutorial|recipe|procedure|directions|process|plan|formula|blueprint|"
    r"tips|method|explain|tell\Wme|show\Wme|teach\Wme|give\Wme|provide|write|create|generate|list|describe|detail|"
    r"outline|help\Wme|i\Wwant\Wto|i\Wneed\Wto|i\Wd\Wlike\Wto|i\Wwanna|can\Wi|could\Wi|should\Wi|what|which|where|"
    r"please|como|cómo|wie|comment|come|hoe|anleitung|instrucciones|receta|ricetta|recette|istruzioni|paso\Wa\Wpaso|"
    r"passo\Wa\Wpasso|etape\Wpar\Wetape|schritt\Wfur\Wschritt|explica\w*|explique\w*|erklar\w*|spiega\w*|dime|"
    r"dimmi|dis\Wmoi|sag\Wmir|zeig\Wmir|muestrame|montre\Wmoi|mostrami)(?!\w)"
)
_IMPERATIVE_START = re.compile(
    r"^\W{0,3}(?:(?:please|pls|now|ok|okay|so|and|then|can\Wyou|could\Wyou|would\Wyou|will\Wyou)\W{1,3})*"
    r"(?:write|create|generate|make|build|code|develop|program|give|list|produce|draft|compose|craft|design|"
    r"synthesi[sz]e|cook|tell|explain|describe|provide|show|teach)(?!\w)"
)
_EVASION = re.compile(
    r"(?<!\w)(?:without\W(?:(?:getting|being|ever\Wbeing)\W(?:caught|detected|noticed|seen|traced|tracked|arrested|"
    r"identified|found\Wout)|(?:anyone|anybody|them|him|her|the\W\w+|my\W\w+|police|cops)\W(?:noticing|knowing|finding\W"
    r"out|seeing|suspecting|realizing|realising)|leaving\W(?:a\W|any\W)?(?:trace|traces|evidence|fingerprints)|"
    r"(?:a\W)?(?:background\Wcheck|prescription|trace)|detection)|avoid\W(?:the\W)?(?:police|cops|detection|getting\W"
    r"caught|being\Wcaught)|not\Wget\Wcaught|so\W(?:that\W)?no\W?one\W(?:finds\Wout|notices|knows|"
    r"will\Wknow)|undetect(?:ed|able)|untraceable|showing\Wup\Win\Wan?\W(?:autopsy|drug\Wtest|toxicology)|"
    r"look\Wlike\Wan?\W(?:accident|suicide|natural\Wdeath)|avoid\Wthe\Wpolice|sin\Wque\W(?:me|nos|lo|la)\W(?:pillen|descubran|atrapen)|"
    r"sans\Wse\Wfaire\W(?:prendre|attraper|remarquer)|ohne\Werwischt|senza\Wfarsi\W(?:beccare|scoprire|prendere)|"
    r"sem\Wser\W(?:pego|descoberto))(?!\w)"
)
GATE = frozenset().union(
    *(gate for _, _, gate in _OBJECTS), *(gate for _, gate in _ACTS), _LETHAL_WORDS, _EVASION_WORDS
)
_SENTENCE = re.compile(r"[^.!?\n]+")
_WORD_VIEW = bytes(i if chr(i).isalnum() or i == 95 else 32 for i in range(128)) + b" " * 128
_LOOKBACK = 100  # characters before an object where its act is looked for (four words and the act)
_REQUEST_REACH = 120  # characters before the act where the request is looked for


def spans(folded: Folded) -> list[Span]:
    present = GATE & folded.words
    if not present:
        return []
    text = folded.text
    found: dict[str, Span] = {}
    # Only sentences holding an object, a crime or an evasion word are read: those around the places
    # of the text's gate words (whole words on a byte view), each sentence once, in the text's order.
    view = b" " + folded.ascii.translate(_WORD_VIEW) + b" "
    places: list[int] = []
    for word in present:
        needle = b" " + word + b" "
        at = view.find(needle)
        while at != -1:
            places.append(at)  # the padding's offset: the word's own in the text
            at = view.find(needle, at + len(needle) - 1)
    done = -1
    for at in sorted(places):
        if at < done:
            continue  # in a sentence already read
        sentence = _SENTENCE.match(text, _sentence_start(text, at))
        if sentence is None:
            continue
        done = sentence.end()
        if len(found) == 3:
            break
        words = frozenset(sentence.group().encode("ascii", "replace").translate(_WORD_VIEW).split())
        _read(folded, sentence.group(), sentence.start(), words, found)
    return sorted(found.values(), key=lambda span: span.start)


def _sentence_start(text: str, at: int) -> int:
    """Where the sentence (`_SENTENCE`) holding the character at `at` starts: after the last end before it."""
    return max(text.rfind(".", 0, at), text.rfind("!", 0, at), text.rfind("?", 0, at), text.rfind("\n", 0, at)) + 1


def _read(folded: Folded, sentence: str, offset: int, words: frozenset[bytes], found: dict[str, Span]) -> None:
    evasion = _EVASION.search(sentence) if not _EVASION_WORDS.isdisjoint(words) else None
    if evasion is not None and "evasion" not in found:
        found["evasion"] = _span(folded, offset + evasion.start(), offset + evasion.end(), "evasion")
    for act_start, act_end, requested in _acts(sentence, words, evasion is not None):
        label = "harmful_request" if requested else "harmful_topic"
        if label not in found:
            found[label] = _span(folded, offset + act_start, offset + act_end, label)
        if requested:
            return


def _acts(sentence: str, words: frozenset[bytes], evading: bool) -> list[tuple[int, int, bool]]:
    """Each act on an object in the sentence: (start, end, whether it is requested)."""
    acts: list[tuple[int, int, bool]] = []
    for kind, pattern, gate in _OBJECTS:
        if gate.isdisjoint(words):
            continue
        for thing in pattern.finditer(sentence):
            before = sentence[max(0, thing.start() - _LOOKBACK) : thing.start()]
            act = _governing(before, _VERBS[kind])
            if act is None and evading:
                act = _governing(before, _GET_RE)
            if act is not None:
                start = thing.start() - len(before) + act
                acts.append((start, thing.end(), _requested(sentence, start)))
            elif _PROCEDURE.search(before) is not None or _VERB_LAST.match(sentence[thing.end() :]) is not None:
                acts.append((thing.start(), thing.end(), _requested(sentence, thing.start())))
            elif (
                _governing(before, _PAST_RE) is not None
                or _PASSIVE.match(sentence, thing.end()) is not None
                or _NARRATED.match(sentence, thing.end()) is not None
            ):
                acts.append((thing.start(), thing.end(), False))
    for pattern, gate in _ACTS:
        if not gate.isdisjoint(words):
            acts += [
                (crime.start(), crime.end(), _requested(sentence, crime.start()))
                for crime in pattern.finditer(sentence)
            ]
    if not _LETHAL_WORDS.isdisjoint(words):
        acts += [(lethal.start(), lethal.end(), False) for lethal in _LETHAL.finditer(sentence)]
    return acts


def _governing(before: str, verbs: re.Pattern[str]) -> int | None:
    """Where, in the text before an object, the last verb of `verbs` that governs it starts: at most four
    words before it, none of them detaching it ("write a story about a bomb")."""
    found = list(verbs.finditer(before))
    if not found:
        return None
    verb = found[-1]  # the nearest: a farther one is farther still from governing it
    between = before[verb.end() :]
    if _GOVERNS.match(between) is None:
        return None
    words = set(re.findall(r"\w+", between))
    if words & _DETACHED or ("of" in words and _OF_LIST.search(between) is None):
        return None
    return verb.start()


def _requested(sentence: str, at: int) -> bool:
    """A request before the act in its sentence, or the sentence starts with an imperative that asks for it."""
    before = sentence[max(0, at - _REQUEST_REACH) : at]
    if _REQUEST.search(before) is not None:
        return True
    return _IMPERATIVE_START.match(sentence) is not None


def _span(folded: Folded, start: int, end: int, label: str) -> Span:
    return Span(*folded.span(start, end), label, WEIGHTS[label])
