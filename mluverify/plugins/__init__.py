"""Built-in plugins, one concern each, written exactly like third-party plugins.

``mluverify.core.plugin_manager.DEFAULT_PLUGINS`` lists them in load order.
"""
