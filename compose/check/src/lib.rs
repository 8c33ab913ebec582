//! Nothing here: the crate exists for its tests (`tests/compose.rs`), which check `compose/`
//! without a Docker engine. See that file.
