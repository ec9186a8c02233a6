//! The group recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(name = "group", prefixes = ["/group"], methods = [hello]);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /group and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/group")?.is_none() {
        cx.create("/group", b"", CreateMode::Persistent)?;
    }
    cx.create(
        "/group/hello-",
        a.who.as_bytes(),
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(cx.children("/group")?.len()))
}
