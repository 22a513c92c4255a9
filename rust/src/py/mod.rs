//! The only module of the crate that imports PyO3: it builds the `kctl._engine` extension module.

mod convert;
mod engine;
mod payload;
mod selector;
mod sets;
mod statetable;
mod store;

use pyo3::prelude::*;

/// Whether this library was compiled with optimisations (so a slow debug build is easy to spot).
const BUILD_PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

#[pymodule]
#[pyo3(name = "_engine")]
fn engine_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build_profile", BUILD_PROFILE)?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<sets::Parts>()?;
    m.add_class::<sets::Replicas>()?;
    m.add_class::<sets::Outcomes>()?;
    m.add_class::<statetable::StateTable>()?;
    m.add_class::<payload::PartitionStates>()?;
    Ok(())
}
