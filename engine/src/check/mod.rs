//! The checker: every static check of LANGUAGE.md §4 and its appendix.

pub mod suggest;
