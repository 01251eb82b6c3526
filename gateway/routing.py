"""Choose the deployment for a request: the routing header first, else the body's `model`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.errors import NotFound

DEPLOYMENT_HEADERS = ("x-gateway-deployment", "x-enkrypt-deployment")


class Router:
    def __init__(self, deployments: Iterable[tuple[str, Iterable[str]]]) -> None:
        """`deployments`: (name, aliases) pairs; names and aliases are unique (the config checks)."""
        self._by_model: dict[str, str] = {}
        for name, aliases in deployments:
            self._by_model[name] = name
            for alias in aliases:
                self._by_model[alias] = name

    def resolve(self, headers: Mapping[str, str], model: str) -> str:
        for header in DEPLOYMENT_HEADERS:
            wanted = headers.get(header)
            if wanted:
                wanted = wanted.strip()
                if wanted not in self._by_model:
                    raise NotFound(
                        f"The deployment '{wanted}' (from the {header} header) does not exist.",
                        param=header,
                        code="deployment_not_found",
                    )
                return self._by_model[wanted]
        name = self._by_model.get(model)
        if name is None:
            raise NotFound(
                f"The model '{model}' does not exist or you do not have access to it: it names no deployment "
                f"or alias of this gateway (see GET /v1/models).",
                param="model",
                code="model_not_found",
            )
        return name

    def names_for(self, deployment: str) -> list[str]:
        """The deployment's name followed by its aliases."""
        return [model for model, owner in self._by_model.items() if owner == deployment]
