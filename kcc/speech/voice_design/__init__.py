"""`kcc voice design`: a Kokoro voice pack made to sound like a target recording.

mel.py (the encoder's front-end in numpy), encoder_circuit.py + encoder.py (resemblyzer's GE2E
speaker encoder, compiled by kcc), target.py (decode, check and embed the target), pitch.py (the
guard's pitch statistics), search.py (blend official voices, then walk), race.py (several walks,
the best goes on), run.py (a request to a pack on disk: the CLI's and kcc.design_voice's), cli.py
(the command).

Only constants here: cli.py reads DEFAULT_MINUTES without loading the encoder or the model.
"""

# The budget bench/results/voice_design.md measured a design with (held out 0.94-0.96 of a 0.97
# ceiling on 2 cores): a user's default run is the one the results describe.
DEFAULT_MINUTES = 14.0
