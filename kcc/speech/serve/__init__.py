"""`kcc serve` (OpenAI-compatible HTTP, Starlette on uvicorn) and `kcc wyoming` (Home Assistant)."""
