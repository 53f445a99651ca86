//! Random seed graphs, valid by construction.
