"""The native engine (Rust, PyO3). Users never import it: kctl's public modules wrap it."""

__version__: str
build_profile: str
"""``"release"`` or ``"debug"``: a debug build is correct but much slower."""
