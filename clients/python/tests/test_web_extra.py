"""Without the `web` extra, the dashboard says what to install (not a bare missing-module error)."""

import importlib
import sys

import pytest


def _forget_web() -> dict:
    return {n: sys.modules.pop(n) for n in list(sys.modules) if n.startswith("redis_reclaim.web")}


def test_a_missing_web_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = _forget_web()
    monkeypatch.setitem(sys.modules, "jinja2", None)  # as if not installed: import raises
    try:
        with pytest.raises(ModuleNotFoundError) as err:
            importlib.import_module("redis_reclaim.web")
        assert err.value.name == "jinja2"
        assert str(err.value) == (
            "the redis-reclaim dashboard needs its `web` extra (jinja2 is not installed): "
            'pip install "./clients/python[web]" from a checkout of redis-reclaim'
        )
    finally:
        _forget_web()
        sys.modules.update(saved)


def test_another_missing_module_is_not_blamed_on_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = _forget_web()
    monkeypatch.setitem(sys.modules, "redis_reclaim.web._app", None)
    try:
        with pytest.raises(ModuleNotFoundError) as err:
            importlib.import_module("redis_reclaim.web")
        assert "web` extra" not in str(err.value)
    finally:
        _forget_web()
        sys.modules.update(saved)
