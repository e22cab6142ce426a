print("wlstorage")
