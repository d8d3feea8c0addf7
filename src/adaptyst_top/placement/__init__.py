"""Task API, performance models and the placement advisor (no Textual import)."""
