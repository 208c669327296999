"""kcc, the Kokoro Circuit Compiler: declared circuits -> checked generated C11 -> X-Ray parity."""
__version__ = "0.2.0"
