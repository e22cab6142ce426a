// What a program that imports WLStorage sees of the layers below it: the error type, declared with the cell's state
// machine in WLStorageCore.
@_exported import WLStorageCore
