"""Importers that turn other releases of the Kokoro-82M weights into the kokoro-v1_0.pth layout."""
from kcc.weights.importers.onnx_kokoro import ImportReport, OnnxImportError, import_onnx, save_checkpoint

__all__ = ["ImportReport", "OnnxImportError", "import_onnx", "save_checkpoint"]
