//! The twophase recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(
    name = "twophase",
    prefixes = ["/twophase"],
    methods = [hello]
);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /twophase and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/twophase")?.is_none() {
        cx.create("/twophase", b"", CreateMode::Persistent)?;
    }
    cx.create(
        "/twophase/hello-",
        a.who.as_bytes(),
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(cx.children("/twophase")?.len()))
}
