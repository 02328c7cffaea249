"""The pluggy plugin manager of one run: built per pytest config and per CLI command, handed to
what calls hooks, configured at the start of the run and unconfigured at its end. There is no
process-wide manager: two runs in one process see only their own plugins.

Every plugin, however it comes (built-in, entry point, ``-p``, conftest.py, registered late), is
checked when it registers: a ``mluverify_*`` function that is no hook (a misspelled name, or a
hook without ``@mluverify.hookimpl``, which pluggy would silently ignore) is a PluginError naming
the plugin and the nearest hook, and pluggy rejects what does not fit a spec. Historic hooks
(``mluverify_addhooks``, ``mluverify_add_backends``) reach plugins registered later too.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import sys
from typing import Any, Iterable, Iterator

import pluggy

from mluverify.core import hookspecs
from mluverify.errors import PluginError

# Built-in behaviour, one concern per module, loaded exactly like third-party plugins;
# ``mlu_device`` first: it adds the device's hook specifications that later plugins implement.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "mluverify.plugins.mlu_device",
    "mluverify.plugins.torch_devices",
    "mluverify.plugins.inductor_backend",
    "mluverify.plugins.mlu_backend",
    "mluverify.plugins.report_writers",
    "mluverify.plugins.opinfo_cases",
    "mluverify.plugins.captured_cases",
    "mluverify.plugins.ort_backend",
    "mluverify.plugins.openvino_backend",
    "mluverify.plugins.tvm_backend",
    "mluverify.plugins.iree_backend",
    "mluverify.plugins.executorch_backend",
)


def new_plugin_manager(extra: Iterable[Any] = (), *, entry_points: bool = True) -> pluggy.PluginManager:
    """Build a plugin manager with the built-ins, entry-point plugins and ``extra`` plugins.

    ``extra`` holds module names or plugin objects (e.g. from ``-p`` under pytest).
    A plugin with an unknown or undecorated hook raises PluginError naming the plugin.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.hook.mluverify_addhooks.call_historic(kwargs={"pluginmanager": pm})
    for name in DEFAULT_PLUGINS:
        register(pm, name)
    if entry_points:
        _load_entry_points(pm)
    for plugin in extra:
        register(pm, plugin)
    return pm


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    try:
        pm.load_setuptools_entrypoints(hookspecs.PROJECT)
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {_name(pm, exc.plugin)}: {exc}") from None
    for plugin, _ in pm.list_plugin_distinfo():
        check_plugin(pm, plugin)
    _check_pending(pm)


def register(pm: pluggy.PluginManager, plugin: Any) -> None:
    """Register a plugin object or importable module name, once, and check it."""
    if isinstance(plugin, str):
        if pm.get_plugin(plugin) is not None:
            return
        try:
            plugin_object, name = importlib.import_module(plugin), plugin
        except ImportError as exc:
            raise PluginError(f"cannot import mluverify plugin {plugin!r}: {exc}") from exc
    else:
        if pm.is_registered(plugin):
            return
        plugin_object, name = plugin, None
    check_plugin(pm, plugin_object)
    try:
        pm.register(plugin_object, name=name)
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {_name(pm, plugin_object)}: {exc}") from None
    except Exception as exc:  # a historic hook, called for the plugin as it registers, raised
        pm.unregister(plugin_object)
        raise PluginError(f"plugin {_name(pm, plugin_object)} raised when registered (historic hooks "
                          f"are called then): {type(exc).__name__}: {exc}") from exc
    _check_pending(pm)
    try:
        call_hook(pm, "mluverify_plugin_registered", plugin=plugin_object, pluginmanager=pm)
    except PluginError:
        pm.unregister(plugin_object)
        raise


def configure(pm: pluggy.PluginManager) -> None:
    """Start the run of ``pm``: call ``mluverify_configure`` (e.g. hand ``pm`` to the device)."""
    call_hook(pm, "mluverify_configure", pluginmanager=pm)


def unconfigure(pm: pluggy.PluginManager) -> None:
    """End the run of ``pm``: call ``mluverify_unconfigure`` (e.g. reset the device)."""
    call_hook(pm, "mluverify_unconfigure", pluginmanager=pm)


@contextlib.contextmanager
def configured_plugin_manager(extra: Iterable[Any] = (), *, entry_points: bool = True
                              ) -> Iterator[pluggy.PluginManager]:
    """A new plugin manager (``new_plugin_manager``), configured for the ``with`` block: the run
    of one CLI command (or of a script that hands its kernel plugins to the device)."""
    pm = new_plugin_manager(extra, entry_points=entry_points)
    try:
        configure(pm)
        yield pm
    finally:
        unconfigure(pm)


def _check_pending(pm: pluggy.PluginManager) -> None:
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {_name(pm, exc.plugin)}: {exc}") from None


def check_plugin(pm: pluggy.PluginManager, plugin: Any) -> None:
    """Every ``mluverify_*`` function of ``plugin`` must be a hook pluggy will call: one with a
    spec, marked ``@mluverify.hookimpl``. Else a PluginError names it and the nearest hook."""
    known = hook_names(pm)
    for attribute in dir(plugin):
        if not attribute.startswith(f"{hookspecs.PROJECT}_") or not callable(getattr(plugin, attribute, None)):
            continue
        if attribute not in known:
            nearest = difflib.get_close_matches(attribute, known, n=1, cutoff=0.6)
            hint = f"did you mean {nearest[0]}?" if nearest else f"the hooks are {', '.join(sorted(known))}"
            raise PluginError(f"plugin {_name(pm, plugin)}: {attribute} is not a mluverify hook; {hint}")
        if pm.parse_hookimpl_opts(plugin, attribute) is None:
            raise PluginError(f"plugin {_name(pm, plugin)}: {attribute} is not decorated with "
                              f"@mluverify.hookimpl, so it would never be called")


def hook_names(pm: pluggy.PluginManager) -> list[str]:
    """The hooks with a specification in ``pm``."""
    return [name for name, caller in vars(pm.hook).items() if getattr(caller, "spec", None) is not None]


def _name(pm: pluggy.PluginManager, plugin: Any) -> str:
    """A plugin's registered or module name, and the file that defines it."""
    is_module = hasattr(plugin, "__file__")
    module_name = plugin.__name__ if is_module else type(plugin).__module__
    name = pm.get_name(plugin) if pm.is_registered(plugin) else None
    if not name or name.isdigit():  # pluggy names an unnamed object by its id
        name = module_name if is_module else f"{module_name}.{type(plugin).__qualname__}"
    where = getattr(sys.modules.get(module_name), "__file__", None)
    return f"{name!r}" + (f" ({where})" if where else "")


def call_hook(pm: pluggy.PluginManager, name: str, **kwargs: Any) -> Any:
    """Call hook ``name`` (a historic one also for plugins registered later, returning None); a
    plugin that raises becomes a PluginError naming plugin and hook (a PluginError raised
    inside, which names its culprit already, passes unchanged)."""
    hook = getattr(pm.hook, name)
    try:
        if hook.is_historic():
            return hook.call_historic(kwargs=kwargs)
        return hook(**kwargs)
    except PluginError:
        raise
    except Exception as exc:
        culprit = _culprit(pm, exc)
        raise PluginError(f"plugin {culprit} raised in hook {name}: {type(exc).__name__}: {exc}") from exc


def _culprit(pm: pluggy.PluginManager, exc: Exception) -> str:
    """Name the plugin whose code raised ``exc``: the innermost plugin module in the traceback."""
    plugin_modules = {getattr(p, "__name__", None) for p in pm.get_plugins()}
    found = "<unknown>"
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__")
        if module in plugin_modules:
            found = f"{module!r} ({tb.tb_frame.f_code.co_filename})"
        tb = tb.tb_next
    return found
