//! The queue recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(name = "queue", prefixes = ["/queue"], methods = [hello]);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /queue and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/queue")?.is_none() {
        cx.create("/queue", b"", CreateMode::Persistent)?;
    }
    cx.create(
        "/queue/hello-",
        a.who.as_bytes(),
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(cx.children("/queue")?.len()))
}
