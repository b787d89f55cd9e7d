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
 * A backend on a new device, for `tf.registerBackend(name, () =>
 * createBackend(options))`; `options` are `Device.request`'s.
 */
export declare function createBackend(options?: Parameters<typeof Device.request>[0]): Promise<WebfusionBackend>;

/** Kernel name -> kernel function: every TF.js kernel webfusion computes. */
export declare const kernels: Record<string, KernelFunc>;
