obj.spec.suspend = true
return obj
