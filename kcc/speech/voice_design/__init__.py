"""`kcc voice design`: a Kokoro voice pack made to sound like a target recording.

mel.py (the encoder's front-end in numpy), encoder.py (resemblyzer's GE2E speaker encoder in
numpy), target.py (decode, check and embed the target), search.py (blend official voices, then
walk), cli.py (the command).
"""
