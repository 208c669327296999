"""The PyTorch side: upstream kokoro==0.9.4 modules, seeded test checkpoints, pinned captures.

Nothing here is imported by the generated-C path; it exists to make and check evidence.
"""
