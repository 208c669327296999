"""Reading model files: checkpoints (no torch), the int8 ONNX export, the pinned real-weight fetch."""
