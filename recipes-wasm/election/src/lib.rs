//! The election recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(
    name = "election",
    prefixes = ["/election"],
    methods = [hello]
);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /election and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/election")?.is_none() {
        cx.create("/election", b"", CreateMode::Persistent)?;
    }
    cx.create(
        "/election/hello-",
        a.who.as_bytes(),
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(cx.children("/election")?.len()))
}
