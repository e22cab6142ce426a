// What a program that imports WLStorage sees of the layers below: the error type, from WLStorageCore.
@_exported import WLStorageCore
