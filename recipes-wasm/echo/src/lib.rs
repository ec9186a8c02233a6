//! The smallest recipe: `noop` does nothing, `echo` returns its argument,
//! `fail` returns an error, `boom` panics (to test that the message reaches the
//! caller), `whoami` returns the caller's session and guid.
use wazoo_sdk::prelude::*;

recipe!(
    name = "echo",
    prefixes = [],
    methods = [noop, echo, fail, boom, whoami]
);

fn noop(_cx: &mut Ctx, _args: ()) -> Result<Step<()>> {
    Ok(Step::Done(()))
}

fn echo(_cx: &mut Ctx, value: String) -> Result<Step<String>> {
    Ok(Step::Done(value))
}

fn fail(_cx: &mut Ctx, message: String) -> Result<Step<()>> {
    Err(Error::new(42, message))
}

fn boom(_cx: &mut Ctx, message: String) -> Result<Step<()>> {
    panic!("boom: {message}")
}

fn whoami(cx: &mut Ctx, _args: ()) -> Result<Step<(i64, String)>> {
    Ok(Step::Done((
        cx.caller_session(),
        cx.caller_guid().to_string(),
    )))
}
