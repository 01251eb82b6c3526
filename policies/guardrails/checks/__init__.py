"""The guardrail checks themselves, one module per `check:` name (`json_shape` is `json`,
`patterns` is `regex`). Each reads the folded text views of `policies.guardrails.normalize` and
returns verdicts; the engine and the input, output and stream guards above run them."""
