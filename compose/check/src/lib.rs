//! Nothing here: the crate exists for its tests (`tests/compose/`: main.rs with the shared helpers,
//! one module per concern), which check `compose/` without a Docker engine. See tests/compose/main.rs.
#![forbid(unsafe_code)]
