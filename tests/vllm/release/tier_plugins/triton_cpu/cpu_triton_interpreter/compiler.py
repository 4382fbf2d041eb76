"""The backend's compiler: none. Under ``TRITON_INTERPRET=1`` ``triton.jit``
makes interpreted functions, which never reach a compiler; anything that
does fails here, loudly."""

from __future__ import annotations

from triton.backends.compiler import BaseBackend

NO_COMPILER = "the cpu backend compiles nothing: Triton's interpreter runs (TRITON_INTERPRET=1)"


class InterpreterBackend(BaseBackend):
    @staticmethod
    def supports_target(target) -> bool:
        return target.backend == "cpu"

    def hash(self) -> str:
        return "cpu-interpreter"

    def parse_options(self, options: dict) -> object:
        raise RuntimeError(NO_COMPILER)

    def add_stages(self, stages: dict, options: object, language) -> None:
        raise RuntimeError(NO_COMPILER)

    def load_dialects(self, context) -> None:
        raise RuntimeError(NO_COMPILER)

    def get_module_map(self) -> dict:
        return {}
