//! The double_barrier recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(
    name = "double_barrier",
    prefixes = ["/double_barrier"],
    methods = [hello]
);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /double_barrier and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/double_barrier")?.is_none() {
        cx.create("/double_barrier", b"", CreateMode::Persistent)?;
    }
    cx.create(
        "/double_barrier/hello-",
        a.who.as_bytes(),
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(cx.children("/double_barrier")?.len()))
}
