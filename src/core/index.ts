// The core layer: types, file formats, errors. Imports nothing from other layers.
export * from './errors';
export * from './stop';
export * from './fs';
export * from './schema';
export * from './random';
export * from './stats';
export * from './text';
export * from './events';
export * from './run';
export * from './losses';
export * from './trajectory';
export * from './doctor';
export * from './workers';
export * from './cpu';
