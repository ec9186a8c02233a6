//! The barrier recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(name = "barrier", prefixes = ["/barrier"], methods = [hello]);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /barrier and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/barrier")?.is_none() {
        cx.create("/barrier", b"", CreateMode::Persistent)?;
    }
    cx.create(
        "/barrier/hello-",
        a.who.as_bytes(),
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(cx.children("/barrier")?.len()))
}
