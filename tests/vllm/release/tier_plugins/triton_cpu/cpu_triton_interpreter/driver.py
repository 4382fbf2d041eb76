"""The backend's driver: active exactly when Triton's interpreter is on
(vLLM's gate asks ``driver.is_active()``), so that without
``TRITON_INTERPRET=1`` vLLM never believes it has a Triton that would
compile."""

from __future__ import annotations

import os

from triton.backends.driver import DriverBase


class InterpreterDriver(DriverBase):
    @classmethod
    def is_active(cls) -> bool:
        return os.environ.get("TRITON_INTERPRET") == "1"

    def map_python_to_cpp_type(self, ty: str) -> str:
        raise NotImplementedError("the cpu backend compiles nothing: Triton's interpreter runs")

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cpu", 0, 0)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_benchmarker(self):
        raise NotImplementedError("the cpu backend compiles nothing: Triton's interpreter runs")
