"""One-op repairs: an op rewritten into the form one converter or runtime converts or computes
right."""
