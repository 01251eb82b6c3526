"""The `injection` check's learned tier: a logistic regression over hashed character n-grams of the
folded words, trained by scripts/train_injection_model.py on tests/data/guardrails and shipped as
`weights.bin` and `model.json` beside this file. `features` says what the model reads (shared with
the training script), `model` loads the shipped weights and scores a text in pure Python."""
