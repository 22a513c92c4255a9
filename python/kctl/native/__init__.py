"""The ``rust`` engine: the public engine-backed classes on top of ``kctl._engine.Engine``.

The native engine holds the context, the request batches and both state machines; these classes
convert at the boundary and route state-change log lines and requests as the reference does.
"""
