// What both demo pages do the same way: one queue of GPU jobs, so a button
// never interleaves with a training batch, and one place where whatever an
// action throws is shown (#error), never left unhandled.

export const $ = (id) => document.getElementById(id);

let queue = Promise.resolve();
/** Runs `job` after every job queued before it; resolves to its result. */
export function exclusive(job) {
  const run = queue.then(job);
  queue = run.catch(() => {});
  return run;
}

export const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

/** Shows what an action threw, where the page's errors go. */
export function showError(error) {
  const shown = $('error');
  shown.textContent = `${error.name}: ${error.message}`;
  shown.hidden = false;
}

/** An action succeeded: the error an earlier one showed is gone. */
export function clearError() {
  const shown = $('error');
  shown.hidden = true;
  shown.textContent = '';
}

/**
 * A control's handler: `job` queued with the GPU work, what it throws
 * shown (the promise never rejects, so no rejection is left unhandled), an
 * earlier error cleared when it succeeds.
 */
export function guarded(job) {
  return () => exclusive(job).then(clearError, showError);
}
