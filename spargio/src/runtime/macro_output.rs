//! How `#[spargio::main]` and `#[spargio::test]` bring the body's result
//! from shard 0, where the body runs, back to the calling thread.
//!
//! The result crosses threads, so it must be `Send`. tokio's commonest
//! `main` signature is the exception that matters: `-> Result<T,
//! Box<dyn Error>>`, whose box is not `Send` (the error could hold
//! thread-bound data). Its error crosses as text instead: a
//! [`CarriedError`] keeps the error's `Debug` and `Display` output and
//! becomes a `Box<dyn Error>` again on the calling thread, where `main`'s
//! `Termination` or the test harness prints it exactly as it would have
//! printed the original. (Its source chain is not kept; the `Debug` text
//! usually shows it.)
//!
//! The macro picks the way by method resolution on the result's concrete
//! type (autoref specialization): `pack` on [`Wrap`] of a `Result<T,
//! Box<dyn Error>>` takes `&Wrap`, and for any other type it takes
//! `&&Wrap`, one autoref further, so the carried way wins where it
//! applies and every other result crosses as it is; one that is not
//! `Send` fails to compile with "cannot be sent between threads safely".
//! On the calling thread, [`Unpack`] turns either back into the
//! function's declared type.

use std::cell::Cell;
use std::error::Error;
use std::fmt;

/// The body's result, for `pack` to take by reference.
pub struct Wrap<T>(Cell<Option<T>>);

impl<T> fmt::Debug for Wrap<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Wrap(..)")
    }
}

impl<T> Wrap<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Wrap<T> {
        Wrap(Cell::new(Some(value)))
    }

    fn take(&self) -> T {
        self.0.take().expect("a macro's result is packed once")
    }
}

/// A `Result<T, Box<dyn Error>>`: the error crosses as its text.
pub trait PackBoxedError {
    /// What crosses.
    type Packed;
    /// Takes the result out for the crossing.
    fn __spargio_pack(&self) -> Self::Packed;
}

impl<T: Send> PackBoxedError for Wrap<Result<T, Box<dyn Error>>> {
    type Packed = Carried<T>;
    fn __spargio_pack(&self) -> Carried<T> {
        Carried(self.take().map_err(|e| CarriedError {
            debug: format!("{e:?}"),
            display: e.to_string(),
        }))
    }
}

/// Any other result: crosses as it is (and fails to compile, at the bound
/// of `run_local_on`, with "cannot be sent between threads safely" when it
/// is not `Send`).
pub trait PackSend {
    /// What crosses.
    type Packed;
    /// Takes the result out for the crossing.
    fn __spargio_pack(&self) -> Self::Packed;
}

impl<T> PackSend for &Wrap<T> {
    type Packed = Plain<T>;
    fn __spargio_pack(&self) -> Plain<T> {
        Plain(self.take())
    }
}

/// A `Send` result on its way back.
#[derive(Debug)]
pub struct Plain<T>(T);

/// A `Result<T, Box<dyn Error>>` on its way back, its error as text.
#[derive(Debug)]
pub struct Carried<T>(Result<T, CarriedError>);

/// A `Box<dyn Error>` that crossed from shard 0: the original's `Debug`
/// and `Display` output.
pub(crate) struct CarriedError {
    debug: String,
    display: String,
}

impl fmt::Debug for CarriedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.debug)
    }
}

impl fmt::Display for CarriedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

impl Error for CarriedError {}

/// Back to the function's declared result type, on the calling thread.
pub trait Unpack {
    /// The declared type.
    type Output;
    /// The result as the function returns it.
    fn unpack(self) -> Self::Output;
}

impl<T> Unpack for Plain<T> {
    type Output = T;
    fn unpack(self) -> T {
        self.0
    }
}

impl<T> Unpack for Carried<T> {
    type Output = Result<T, Box<dyn Error>>;
    fn unpack(self) -> Result<T, Box<dyn Error>> {
        self.0.map_err(|e| Box::new(e) as Box<dyn Error>)
    }
}
