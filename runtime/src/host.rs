//! What a recipe can do to the tree: the trait the request pipeline
//! implements (defined in the deterministic core, which never sees wasmtime).

pub use wazoo_core::recipe::{path_within, RecipeHost};
