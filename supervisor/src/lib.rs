//! Detached, supervised leaf processes.
