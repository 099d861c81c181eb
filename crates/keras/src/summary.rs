//! `model.summary()`: each layer with its output shape and parameter count, and the totals
//! (trainable and not), in Keras 3's table.
use std::fmt;

use ferroflow_tensor::DType;

use crate::model::Predictor;
use crate::{KerasModel, Result};

/// One row of the summary.
#[derive(Clone, Debug)]
pub struct Row {
    /// The layer's name.
    pub name: String,
    /// Its class.
    pub class: String,
    /// Its output shape(s), as Keras prints them (`(None, 32, 32, 3)`).
    pub output_shape: String,
    /// Its parameters (a nested model's: all of its layers').
    pub params: usize,
    /// Where its inputs come from (functional models).
    pub connected: Vec<String>,
}

/// `model.summary()`.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The model's name.
    pub name: String,
    /// Whether the model is a Sequential (no "Connected to" column).
    pub sequential: bool,
    /// The top-level layers.
    pub rows: Vec<Row>,
    /// Every weight's element count.
    pub total: usize,
    /// Elements of trainable weights (in trainable layers).
    pub trainable: usize,
    /// The rest.
    pub non_trainable: usize,
    /// Bytes of the trainable weights.
    pub trainable_bytes: usize,
    /// Bytes of the rest.
    pub non_trainable_bytes: usize,
}

fn shape_text(s: &ferroflow_tensor::Shape) -> String {
    match s.dims() {
        None => "?".into(),
        Some(d) => {
            let parts: Vec<String> = d.iter().map(|x| x.map_or("None".into(), |x| x.to_string())).collect();
            if parts.len() == 1 {
                format!("({},)", parts[0])
            } else {
                format!("({})", parts.join(", "))
            }
        }
    }
}

impl KerasModel {
    /// `model.summary()` of this model (built in inference mode to know its shapes).
    pub fn summary(&self) -> Result<Summary> {
        let p = self.predictor(Default::default())?;
        Summary::of(&self.spec.name, self.spec.class == "Sequential", &p)
    }
}

impl Summary {
    /// The summary of a built model.
    pub fn of(name: &str, sequential: bool, p: &Predictor) -> Result<Summary> {
        let g = p.session().graph();
        let shapes = ferroflow_ops::infer_shapes(g).map_err(ferroflow_ops::BuildError::from)?;
        let mut rows: Vec<Row> = Vec::new();
        for c in &p.built().calls {
            if c.path.len() != 1 {
                continue;
            }
            let top = &c.path[0];
            if rows.iter().any(|r| &r.name == top) {
                continue;
            }
            if sequential && c.class == "InputLayer" {
                continue;
            }
            let out: Vec<String> = c
                .outputs
                .iter()
                .map(|o| {
                    shape_text(
                        shapes.get(o.node).and_then(|s| s.get(o.index)).unwrap_or(&ferroflow_tensor::Shape::unknown()),
                    )
                })
                .collect();
            let params = p
                .layers()
                .iter()
                .filter(|l| &l.path[0] == top)
                .flat_map(|l| &l.vars)
                .map(|(s, _)| s.shape.iter().product::<usize>())
                .sum();
            rows.push(Row {
                name: top.clone(),
                class: c.class.clone(),
                output_shape: if out.len() == 1 { out[0].clone() } else { format!("[{}]", out.join(", ")) },
                params,
                connected: c.connected.clone(),
            });
        }
        let (mut trainable, mut non, mut tb, mut nb) = (0, 0, 0, 0);
        for l in p.layers() {
            for (s, v) in &l.vars {
                let n: usize = s.shape.iter().product();
                let bytes = n * if s.dtype == DType::Int64 { 8 } else { 4 };
                if v.trainable {
                    trainable += n;
                    tb += bytes;
                } else {
                    non += n;
                    nb += bytes;
                }
            }
        }
        Ok(Summary {
            name: name.to_string(),
            sequential,
            rows,
            total: trainable + non,
            trainable,
            non_trainable: non,
            trainable_bytes: tb,
            non_trainable_bytes: nb,
        })
    }
}

/// `1234567` → `1,234,567`.
fn grouped(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Keras's `readable_memory_size`.
fn readable(bytes: usize) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", units[u])
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut cols = vec![("Layer (type)", 31usize), ("Output Shape", 22), ("Param #", 13)];
        if !self.sequential {
            cols.push(("Connected to", 22));
        }
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut c = vec![format!("{} ({})", r.name, r.class), r.output_shape.clone(), grouped(r.params)];
                if !self.sequential {
                    c.push(r.connected.first().cloned().unwrap_or_else(|| "-".into()));
                }
                c
            })
            .collect();
        for row in &cells {
            for (i, c) in row.iter().enumerate() {
                cols[i].1 = cols[i].1.max(c.chars().count());
            }
        }
        let line = |l: &str, m: &str, r: &str, fill: &str| {
            let parts: Vec<String> = cols.iter().map(|(_, w)| fill.repeat(w + 2)).collect();
            format!("{l}{}{r}", parts.join(m))
        };
        let row = |cells: &[String], sep: &str| {
            let parts: Vec<String> = cells
                .iter()
                .zip(&cols)
                .enumerate()
                .map(|(i, (c, (_, w)))| if i == 2 { format!(" {c:>w$} ") } else { format!(" {c:<w$} ") })
                .collect();
            format!("{sep}{}{sep}", parts.join(sep))
        };
        writeln!(f, "Model: \"{}\"", self.name)?;
        writeln!(f, "{}", line("┏", "┳", "┓", "━"))?;
        let heads: Vec<String> = cols.iter().map(|(h, _)| h.to_string()).collect();
        writeln!(f, "{}", row(&heads, "┃"))?;
        writeln!(f, "{}", line("┡", "╇", "┩", "━"))?;
        for (i, r) in self.rows.iter().enumerate() {
            writeln!(f, "{}", row(&cells[i], "│"))?;
            if !self.sequential {
                for extra in r.connected.iter().skip(1) {
                    let mut blank = vec![String::new(); cols.len()];
                    blank[3] = extra.clone();
                    writeln!(f, "{}", row(&blank, "│"))?;
                }
            }
            if i + 1 < self.rows.len() {
                writeln!(f, "{}", line("├", "┼", "┤", "─"))?;
            }
        }
        writeln!(f, "{}", line("└", "┴", "┘", "─"))?;
        writeln!(
            f,
            " Total params: {} ({})",
            grouped(self.total),
            readable(self.trainable_bytes + self.non_trainable_bytes)
        )?;
        writeln!(f, " Trainable params: {} ({})", grouped(self.trainable), readable(self.trainable_bytes))?;
        write!(f, " Non-trainable params: {} ({})", grouped(self.non_trainable), readable(self.non_trainable_bytes))
    }
}
