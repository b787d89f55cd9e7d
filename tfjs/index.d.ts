import type { KernelBackend, KernelFunc } from '@tensorflow/tfjs-core';
import type { Device } from '../pkg/webfusion.js';

/** The name the backend is registered under: `await tf.setBackend(BACKEND_NAME)`. */
export declare const BACKEND_NAME: 'webfusion';

/** A TF.js backend whose tensors are webfusion tensors on `device`. */
export declare class WebfusionBackend extends KernelBackend {
  constructor(device: Device);
  readonly device: Device;
}

/**
 * A backend on a new device; `options` are `Device.request`'s. TF.js finds
 * kernels by backend name, so a backend registered under a name of its own
 * needs `kernels` registered under that name too:
 *
 *     tf.registerBackend('wf-checked', () => createBackend({ debug: { checkNumerics: true } }));
 *     for (const [kernelName, kernelFunc] of Object.entries(kernels)) {
 *       tf.registerKernel({ kernelName, backendName: 'wf-checked', kernelFunc });
 *     }
 *
 * (For one setting on the default backend, its `device` is its `Device`:
 * `(tf.backend() as WebfusionBackend).device.checkNumerics = true`.)
 */
export declare function createBackend(options?: Parameters<typeof Device.request>[0]): Promise<WebfusionBackend>;

/** Kernel name -> kernel function: every TF.js kernel webfusion computes. */
export declare const kernels: Record<string, KernelFunc>;
