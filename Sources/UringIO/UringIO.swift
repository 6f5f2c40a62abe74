import CLibURing
