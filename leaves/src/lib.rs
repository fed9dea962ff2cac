//! Agent providers behind one contract.
