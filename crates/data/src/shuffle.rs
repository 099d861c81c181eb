//! `shuffle(buffer_size)`: tf.data's buffer semantics. The buffer is filled with the first
//! `buffer_size` elements; each output is drawn uniformly from it and its slot refilled from
//! the input; when the input ends the buffer drains in random order. With a seed the order
//! is reproducible; `reshuffle_each_iteration` gives each new iteration (each pass of a
//! downstream `repeat`) a new order.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroflow_tensor::rng::Rng;

use crate::dataset::{invalid, iterate_input, Ctx, Element, ElementIter, FnIter, Node};
use crate::rng::{epoch_seed, seed_or_random};
use crate::structure::Structure;
use crate::tensors::bytes_of;
use crate::{DataError, Dataset, Result};

struct Shuffle {
    input: Arc<dyn Node>,
    buffer_size: usize,
    seed: u64,
    seeded: bool,
    reshuffle: bool,
    epochs: AtomicU64,
}

impl Node for Shuffle {
    fn kind(&self) -> &'static str {
        "Shuffle"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        // Unseeded shuffles differ run to run: they cannot be replayed from a cache.
        format!("{},{},{}", self.buffer_size, if self.seeded { self.seed } else { u64::MAX }, self.reshuffle)
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = Some(iterate_input(&self.input, ctx)?);
        let epoch = self.epochs.fetch_add(1, Ordering::Relaxed);
        let mut rng = Rng::new(if self.reshuffle { epoch_seed(self.seed, epoch) } else { self.seed });
        let size = self.buffer_size;
        let mut buffer: Vec<Element> = Vec::new();
        let mut filled = false;
        let (path, ram) = (ctx.path.clone(), ctx.budget.ram_bytes);
        let mut bytes = 0u64;
        Ok(Box::new(FnIter(move || {
            if !filled {
                filled = true;
                let start = Instant::now();
                let mut logged = start;
                while buffer.len() < size {
                    let Some(it) = input.as_mut() else { break };
                    match it.next() {
                        Some(Ok(e)) => {
                            bytes += bytes_of(&e);
                            if bytes > ram {
                                return Some(Err(DataError::Invalid(format!(
                                    "{path}: the shuffle buffer holds {} elements ({bytes} bytes) and would exceed the RAM budget of {ram} bytes; use a smaller buffer_size than {size}",
                                    buffer.len() + 1
                                ))));
                            }
                            buffer.push(e);
                        }
                        Some(Err(err)) => return Some(Err(err)),
                        None => input = None,
                    }
                    if logged.elapsed() > Duration::from_secs(5) {
                        log::info!(
                            "{path}: filling up shuffle buffer (this may take a while): {} of {size}",
                            buffer.len()
                        );
                        logged = Instant::now();
                    }
                }
                if start.elapsed() > Duration::from_secs(5) {
                    log::info!("{path}: shuffle buffer filled");
                }
            }
            if buffer.is_empty() {
                return None;
            }
            let i = rng.below(buffer.len());
            let refill = match input.as_mut().map(|it| it.next()) {
                Some(Some(Ok(e))) => Some(e),
                Some(Some(Err(err))) => return Some(Err(err)),
                Some(None) => {
                    input = None;
                    None
                }
                None => None,
            };
            let out = match refill {
                Some(e) => std::mem::replace(&mut buffer[i], e),
                None => buffer.swap_remove(i),
            };
            Some(Ok(out))
        })))
    }
}

impl<T: Structure> Dataset<T> {
    /// The elements in random order through a buffer of `buffer_size` (see the module
    /// docs); `seed` makes the order reproducible.
    pub fn shuffle(&self, buffer_size: usize, seed: Option<u64>, reshuffle_each_iteration: bool) -> Result<Dataset<T>> {
        if buffer_size == 0 {
            return invalid("shuffle: buffer_size must be at least 1");
        }
        Ok(self.then(Shuffle {
            input: self.node.clone(),
            buffer_size,
            seed: seed_or_random(seed),
            seeded: seed.is_some(),
            reshuffle: reshuffle_each_iteration,
            epochs: AtomicU64::new(0),
        }))
    }
}
