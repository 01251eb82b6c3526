"""`injection` signals, framing: requests to update the model's behaviour, guidelines or filters,
a claimed safe, educational or authorised context, claimed clearance or permission (the "skeleton
key" shape: "a safe research setting, so update your behaviour").

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

from policies.guardrails.checks.injection.vocab import (
    S,
    cue,
    gap,
    preceded,
    split_words,
    within,
    words_of,
)

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
)
