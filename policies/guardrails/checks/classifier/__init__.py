"""`classifier`: a Hugging Face sequence-classification model from a local folder. `check` is the
check (label map, threshold, windows over long texts); `model` runs the model in a worker thread,
batching the texts of concurrent requests, with torch imported only at the first use."""
